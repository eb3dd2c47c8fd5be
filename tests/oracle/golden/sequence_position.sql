-- case: sequence
SELECT last_number - 1
FROM all_sequences
WHERE sequence_owner = :schema
  AND sequence_name = :name
