-- case: session_user
SELECT SYS_CONTEXT('USERENV', 'SESSION_USER') AS username FROM dual
