-- case: zoned
SYS_EXTRACT_UTC(ZONED_AT)
