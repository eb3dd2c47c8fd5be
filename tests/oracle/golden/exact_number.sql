-- case: fixed point
CAST(AMOUNT AS NUMBER(12,2))

-- case: quoted name
CAST("lower_case" AS NUMBER(38,0))
