-- case: two tables
WITH wanted AS (
SELECT :s0 AS schema_name, :t0 AS table_name FROM dual
UNION ALL SELECT :s1 AS schema_name, :t1 AS table_name FROM dual
), found AS (
  SELECT DISTINCT t.owner AS table_schema, t.table_name, t.dependencies, t.partitioned
  FROM all_tables t
  JOIN wanted w
    ON t.owner IN (w.schema_name, UPPER(w.schema_name))
   AND t.table_name IN (w.table_name, UPPER(w.table_name))
)
SELECT f.table_schema,
       f.table_name,
       f.dependencies,
       f.partitioned,
       c.column_name,
       c.data_type,
       c.data_type_owner,
       c.data_length,
       c.data_precision,
       c.data_scale,
       c.char_length,
       c.char_used,
       c.nullable,
       c.column_id,
       (SELECT cc.position
        FROM all_constraints k
        JOIN all_cons_columns cc
          ON cc.owner = k.owner
         AND cc.constraint_name = k.constraint_name
         AND cc.table_name = k.table_name
        WHERE k.constraint_type = 'P'
          AND k.owner = f.table_schema
          AND k.table_name = f.table_name
          AND cc.column_name = c.column_name) AS key_position,
       p.partitioning_type,
       (SELECT pk.column_position
        FROM all_part_key_columns pk
        WHERE pk.owner = f.table_schema
          AND pk.name = f.table_name
          AND pk.object_type = 'TABLE'
          AND pk.column_name = c.column_name) AS partition_position
FROM found f
JOIN all_tab_columns c
  ON c.owner = f.table_schema
 AND c.table_name = f.table_name
LEFT JOIN all_part_tables p
  ON p.owner = f.table_schema
 AND p.table_name = f.table_name
ORDER BY f.table_schema, f.table_name, c.column_id
