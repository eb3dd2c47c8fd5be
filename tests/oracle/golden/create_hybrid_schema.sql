-- case: hybrid schema
DECLARE
  gl_tablespace VARCHAR2(130);
BEGIN
  SELECT DBMS_ASSERT.ENQUOTE_NAME(property_value, FALSE) INTO gl_tablespace
    FROM database_properties
   WHERE property_name = 'DEFAULT_PERMANENT_TABLESPACE';
  EXECUTE IMMEDIATE 'CREATE USER APP_H NO AUTHENTICATION'
    || ' DEFAULT TABLESPACE ' || gl_tablespace
    || ' QUOTA UNLIMITED ON ' || gl_tablespace;
END;
