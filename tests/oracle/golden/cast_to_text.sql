-- case: number
REGEXP_REPLACE(TO_CHAR(ANY_NUMBER, 'TM9', 'NLS_NUMERIC_CHARACTERS=''.,'''), '^(-?)\.', '\10.')

-- case: negative scale
REGEXP_REPLACE(TO_CHAR(HUGE, 'TM9', 'NLS_NUMERIC_CHARACTERS=''.,'''), '^(-?)\.', '\10.')

-- case: float
REGEXP_REPLACE(TO_CHAR(APPROX, 'TM9', 'NLS_NUMERIC_CHARACTERS=''.,'''), '^(-?)\.', '\10.')

-- case: timestamp
LTRIM(TO_CHAR(NANOS_AT, 'SYYYY-MM-DD"T"HH24:MI:SS.FF9'))

-- case: zoned timestamp
LTRIM(TO_CHAR(SYS_EXTRACT_UTC(ZONED_NANOS_AT), 'SYYYY-MM-DD"T"HH24:MI:SS.FF9"Z"'))

-- case: local timestamp
LTRIM(TO_CHAR(SYS_EXTRACT_UTC(LOCAL_NANOS_AT), 'SYYYY-MM-DD"T"HH24:MI:SS.FF9"Z"'))

-- case: rowid
CAST(ROW_ADDRESS AS VARCHAR2(4000))

-- case: urowid
CAST(LOGICAL_ADDRESS AS VARCHAR2(4000))

-- case: interval
TO_CHAR(DURATION)

-- case: no declared type
TO_CHAR("lower_case")
