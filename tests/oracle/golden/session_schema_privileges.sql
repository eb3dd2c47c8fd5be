-- case: session_schema_privileges
SELECT privilege, schema FROM session_schema_privs
