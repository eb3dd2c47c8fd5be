-- case: session_privileges
SELECT privilege FROM session_privs
