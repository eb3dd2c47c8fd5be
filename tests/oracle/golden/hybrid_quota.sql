-- case: hybrid_quota
SELECT COUNT(*) AS quotas
FROM (
    SELECT 1 AS found FROM dba_ts_quotas
    WHERE username = :schema AND (max_bytes = -1 OR max_bytes > 0)
    UNION ALL
    SELECT 1 AS found FROM dba_sys_privs
    WHERE grantee = :schema AND privilege = 'UNLIMITED TABLESPACE'
)
