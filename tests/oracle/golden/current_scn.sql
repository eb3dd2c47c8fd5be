-- case: current_scn
SELECT current_scn FROM v$database
