-- case: CHANGELOG create_changelog_sequence
CREATE SEQUENCE APP_H.SALES_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: CHANGELOG drop_changelog_sequence
DROP SEQUENCE APP_H.SALES_SEQ

-- case: CHANGELOG create_changelog_table
CREATE TABLE APP_H.SALES_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    SALE_ID NUMBER,
    SOLD_ON DATE,
    REGION VARCHAR2(4000)
)
/
COMMENT ON TABLE APP_H.SALES_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: CHANGELOG drop_changelog_table
DROP TABLE APP_H.SALES_LOG PURGE

-- case: CHANGELOG create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.SALES_CT
FOR INSERT OR UPDATE OR DELETE ON APP.SALES
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:
  TYPE gl_key IS RECORD (SALE_ID APP.SALES.SALE_ID%TYPE, SOLD_ON APP.SALES.SOLD_ON%TYPE);
  TYPE gl_keys IS TABLE OF gl_key;
  gl_moved gl_keys := gl_keys();
  gl_old gl_key;
  gl_held PLS_INTEGER;
  TYPE gl_kinds IS TABLE OF CHAR(1);
  gl_kind gl_kinds := gl_kinds();
  TYPE gl_t1 IS TABLE OF APP_H.SALES_LOG.SALE_ID%TYPE;
  gl_c1 gl_t1 := gl_t1();
  TYPE gl_t2 IS TABLE OF APP_H.SALES_LOG.SOLD_ON%TYPE;
  gl_c2 gl_t2 := gl_t2();
  TYPE gl_t3 IS TABLE OF APP_H.SALES_LOG.REGION%TYPE;
  gl_c3 gl_t3 := gl_t3();
  gl_count PLS_INTEGER := 0;

  PROCEDURE gl_empty IS
  BEGIN
    gl_count := 0;
    gl_kind := gl_kinds();
    gl_c1 := gl_t1();
    gl_c2 := gl_t2();
    gl_c3 := gl_t3();
  END gl_empty;

  PROCEDURE gl_flush IS
  BEGIN
    FORALL gl_i IN 1 .. gl_count
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, gl_kind(gl_i), 'T', gl_c1(gl_i), gl_c2(gl_i), gl_c3(gl_i));
    gl_empty;
  END gl_flush;

  BEFORE STATEMENT IS
  BEGIN
    gl_empty;
    gl_moved := gl_keys();
  END BEFORE STATEMENT;

  AFTER EACH ROW IS
  BEGIN
    IF INSERTING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'I';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :NEW.SALE_ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :NEW.SOLD_ON;
      gl_c3.EXTEND;
      gl_c3(gl_count) := :NEW.REGION;
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    ELSIF UPDATING THEN
      IF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
          AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))) THEN
        gl_moved.EXTEND;
        gl_moved(gl_moved.LAST).SALE_ID := :OLD.SALE_ID;
        gl_moved(gl_moved.LAST).SOLD_ON := :OLD.SOLD_ON;
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'I';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.SALE_ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.SOLD_ON;
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW.REGION;
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      ELSIF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
          AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))
          AND ((:NEW.REGION IS NULL AND :OLD.REGION IS NULL) OR (:NEW.REGION IS NOT NULL AND :OLD.REGION IS NOT NULL AND :NEW.REGION = :OLD.REGION))) THEN
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'U';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.SALE_ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.SOLD_ON;
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW.REGION;
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      END IF;
    ELSIF DELETING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'D';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :OLD.SALE_ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :OLD.SOLD_ON;
      gl_c3.EXTEND;
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    END IF;
  END AFTER EACH ROW;

  AFTER STATEMENT IS
  BEGIN
    gl_flush;
    FOR gl_i IN 1 .. gl_moved.COUNT LOOP
      gl_old := gl_moved(gl_i);
      SELECT COUNT(*) INTO gl_held FROM APP.SALES gl_app
        WHERE gl_app.SALE_ID = gl_old.SALE_ID AND gl_app.SOLD_ON = gl_old.SOLD_ON AND ROWNUM = 1;
      IF gl_held = 0 THEN
        INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON)
          VALUES (APP_H.SALES_SEQ.NEXTVAL, 'D', 'T', gl_old.SALE_ID, gl_old.SOLD_ON);
      END IF;
    END LOOP;
  END AFTER STATEMENT;
END;

-- case: CHANGELOG drop_changelog_trigger
DROP TRIGGER APP_H.SALES_CT

-- case: CHANGELOG_INSERT create_changelog_sequence
CREATE SEQUENCE APP_H.SALES_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: CHANGELOG_INSERT drop_changelog_sequence
DROP SEQUENCE APP_H.SALES_SEQ

-- case: CHANGELOG_INSERT create_changelog_table
CREATE TABLE APP_H.SALES_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    SALE_ID NUMBER,
    SOLD_ON DATE,
    REGION VARCHAR2(4000)
)
/
COMMENT ON TABLE APP_H.SALES_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: CHANGELOG_INSERT drop_changelog_table
DROP TABLE APP_H.SALES_LOG PURGE

-- case: CHANGELOG_INSERT create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.SALES_CT
FOR INSERT OR UPDATE OR DELETE ON APP.SALES
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:

  AFTER EACH ROW IS
  BEGIN
    IF INSERTING THEN
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, 'I', 'T', :NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    ELSIF UPDATING THEN
      IF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
          AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))
          AND ((:NEW.REGION IS NULL AND :OLD.REGION IS NULL) OR (:NEW.REGION IS NOT NULL AND :OLD.REGION IS NOT NULL AND :NEW.REGION = :OLD.REGION))) THEN
        INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON)
          VALUES (APP_H.SALES_SEQ.NEXTVAL, 'U', 'T', :OLD.SALE_ID, :OLD.SOLD_ON);
      END IF;
    ELSIF DELETING THEN
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, 'D', 'T', :OLD.SALE_ID, :OLD.SOLD_ON);
    END IF;
  END AFTER EACH ROW;
END;

-- case: CHANGELOG_INSERT drop_changelog_trigger
DROP TRIGGER APP_H.SALES_CT

-- case: UPDATABLE create_changelog_sequence
CREATE SEQUENCE APP_H.SALES_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE drop_changelog_sequence
DROP SEQUENCE APP_H.SALES_SEQ

-- case: UPDATABLE create_changelog_table
CREATE TABLE APP_H.SALES_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    SALE_ID NUMBER,
    SOLD_ON DATE,
    REGION VARCHAR2(4000)
)
/
COMMENT ON TABLE APP_H.SALES_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_changelog_table
DROP TABLE APP_H.SALES_LOG PURGE

-- case: UPDATABLE create_lake_rows_table
CREATE TABLE APP_H.SALES_LK (
    SALE_ID NUMBER(10),
    SOLD_ON DATE,
    REGION VARCHAR2(10)
)
/
CREATE INDEX APP_H.SALES_LK_IX
ON APP_H.SALES_LK (SALE_ID, SOLD_ON)
/
COMMENT ON TABLE APP_H.SALES_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_lake_rows_table
DROP TABLE APP_H.SALES_LK PURGE

-- case: UPDATABLE create_updatable_view
GRANT SELECT ON APP.SALES TO APP_H
/
CREATE OR REPLACE VIEW APP_H.SALES_UV AS
SELECT SALE_ID, SOLD_ON, REGION
FROM APP.SALES
UNION ALL
SELECT gl_staged.SALE_ID, gl_staged.SOLD_ON, gl_staged.REGION
FROM APP_H.SALES_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP.SALES gl_app
    WHERE gl_app.SALE_ID = gl_staged.SALE_ID AND gl_app.SOLD_ON = gl_staged.SOLD_ON
)
/
COMMENT ON TABLE APP_H.SALES_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_updatable_view
DROP VIEW APP_H.SALES_UV

-- case: UPDATABLE create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.SALES_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.SALES_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.SALES gl_app
      WHERE gl_app.SALE_ID = :NEW.SALE_ID AND gl_app.SOLD_ON = :NEW.SOLD_ON AND ROWNUM = 1;
    INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
      VALUES (APP_H.SALES_SEQ.NEXTVAL, 'I', 'V', :NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.SALES_LK gl_staged
        WHERE (gl_staged.SALE_ID = :NEW.SALE_ID AND gl_staged.SOLD_ON = :NEW.SOLD_ON);
      INSERT INTO APP_H.SALES_LK (SALE_ID, SOLD_ON, REGION)
        VALUES (:NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    END IF;
  ELSIF UPDATING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.SALES gl_app
      WHERE gl_app.SALE_ID = :OLD.SALE_ID AND gl_app.SOLD_ON = :OLD.SOLD_ON AND ROWNUM = 1;
    IF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
        AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))) THEN
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, 'D', 'V', :OLD.SALE_ID, :OLD.SOLD_ON);
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, 'I', 'V', :NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    ELSIF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
        AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))
        AND ((:NEW.REGION IS NULL AND :OLD.REGION IS NULL) OR (:NEW.REGION IS NOT NULL AND :OLD.REGION IS NOT NULL AND :NEW.REGION = :OLD.REGION))) THEN
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, 'U', 'V', :NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    END IF;
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.SALES_LK gl_staged
        WHERE (gl_staged.SALE_ID = :OLD.SALE_ID AND gl_staged.SOLD_ON = :OLD.SOLD_ON) OR (gl_staged.SALE_ID = :NEW.SALE_ID AND gl_staged.SOLD_ON = :NEW.SOLD_ON);
      INSERT INTO APP_H.SALES_LK (SALE_ID, SOLD_ON, REGION)
        VALUES (:NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    END IF;
  ELSIF DELETING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.SALES gl_app
      WHERE gl_app.SALE_ID = :OLD.SALE_ID AND gl_app.SOLD_ON = :OLD.SOLD_ON AND ROWNUM = 1;
    INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON)
      VALUES (APP_H.SALES_SEQ.NEXTVAL, 'D', 'V', :OLD.SALE_ID, :OLD.SOLD_ON);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.SALES_LK gl_staged
        WHERE (gl_staged.SALE_ID = :OLD.SALE_ID AND gl_staged.SOLD_ON = :OLD.SOLD_ON);
    END IF;
  END IF;
END;

-- case: UPDATABLE drop_updatable_trigger
DROP TRIGGER APP_H.SALES_UV

-- case: UPDATABLE_CHANGELOG create_changelog_sequence
CREATE SEQUENCE APP_H.SALES_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE_CHANGELOG drop_changelog_sequence
DROP SEQUENCE APP_H.SALES_SEQ

-- case: UPDATABLE_CHANGELOG create_changelog_table
CREATE TABLE APP_H.SALES_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    SALE_ID NUMBER,
    SOLD_ON DATE,
    REGION VARCHAR2(4000)
)
/
COMMENT ON TABLE APP_H.SALES_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_changelog_table
DROP TABLE APP_H.SALES_LOG PURGE

-- case: UPDATABLE_CHANGELOG create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.SALES_CT
FOR INSERT OR UPDATE OR DELETE ON APP.SALES
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:
  TYPE gl_key IS RECORD (SALE_ID APP.SALES.SALE_ID%TYPE, SOLD_ON APP.SALES.SOLD_ON%TYPE);
  TYPE gl_keys IS TABLE OF gl_key;
  gl_moved gl_keys := gl_keys();
  gl_old gl_key;
  gl_held PLS_INTEGER;
  TYPE gl_kinds IS TABLE OF CHAR(1);
  gl_kind gl_kinds := gl_kinds();
  TYPE gl_t1 IS TABLE OF APP_H.SALES_LOG.SALE_ID%TYPE;
  gl_c1 gl_t1 := gl_t1();
  TYPE gl_t2 IS TABLE OF APP_H.SALES_LOG.SOLD_ON%TYPE;
  gl_c2 gl_t2 := gl_t2();
  TYPE gl_t3 IS TABLE OF APP_H.SALES_LOG.REGION%TYPE;
  gl_c3 gl_t3 := gl_t3();
  gl_count PLS_INTEGER := 0;

  PROCEDURE gl_empty IS
  BEGIN
    gl_count := 0;
    gl_kind := gl_kinds();
    gl_c1 := gl_t1();
    gl_c2 := gl_t2();
    gl_c3 := gl_t3();
  END gl_empty;

  PROCEDURE gl_flush IS
  BEGIN
    FORALL gl_i IN 1 .. gl_count
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, gl_kind(gl_i), 'T', gl_c1(gl_i), gl_c2(gl_i), gl_c3(gl_i));
    gl_empty;
  END gl_flush;

  BEFORE STATEMENT IS
  BEGIN
    gl_empty;
    gl_moved := gl_keys();
  END BEFORE STATEMENT;

  AFTER EACH ROW IS
  BEGIN
    IF INSERTING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'I';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :NEW.SALE_ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :NEW.SOLD_ON;
      gl_c3.EXTEND;
      gl_c3(gl_count) := :NEW.REGION;
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    ELSIF UPDATING THEN
      IF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
          AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))) THEN
        gl_moved.EXTEND;
        gl_moved(gl_moved.LAST).SALE_ID := :OLD.SALE_ID;
        gl_moved(gl_moved.LAST).SOLD_ON := :OLD.SOLD_ON;
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'I';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.SALE_ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.SOLD_ON;
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW.REGION;
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      ELSIF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
          AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))
          AND ((:NEW.REGION IS NULL AND :OLD.REGION IS NULL) OR (:NEW.REGION IS NOT NULL AND :OLD.REGION IS NOT NULL AND :NEW.REGION = :OLD.REGION))) THEN
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'U';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.SALE_ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.SOLD_ON;
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW.REGION;
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      END IF;
    ELSIF DELETING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'D';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :OLD.SALE_ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :OLD.SOLD_ON;
      gl_c3.EXTEND;
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    END IF;
  END AFTER EACH ROW;

  AFTER STATEMENT IS
  BEGIN
    gl_flush;
    FOR gl_i IN 1 .. gl_moved.COUNT LOOP
      gl_old := gl_moved(gl_i);
      SELECT COUNT(*) INTO gl_held FROM APP.SALES gl_app
        WHERE gl_app.SALE_ID = gl_old.SALE_ID AND gl_app.SOLD_ON = gl_old.SOLD_ON AND ROWNUM = 1;
      IF gl_held = 0 THEN
        INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON)
          VALUES (APP_H.SALES_SEQ.NEXTVAL, 'D', 'T', gl_old.SALE_ID, gl_old.SOLD_ON);
      END IF;
    END LOOP;
  END AFTER STATEMENT;
END;

-- case: UPDATABLE_CHANGELOG drop_changelog_trigger
DROP TRIGGER APP_H.SALES_CT

-- case: UPDATABLE_CHANGELOG create_lake_rows_table
CREATE TABLE APP_H.SALES_LK (
    SALE_ID NUMBER(10),
    SOLD_ON DATE,
    REGION VARCHAR2(10)
)
/
CREATE INDEX APP_H.SALES_LK_IX
ON APP_H.SALES_LK (SALE_ID, SOLD_ON)
/
COMMENT ON TABLE APP_H.SALES_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_lake_rows_table
DROP TABLE APP_H.SALES_LK PURGE

-- case: UPDATABLE_CHANGELOG create_updatable_view
GRANT SELECT ON APP.SALES TO APP_H
/
CREATE OR REPLACE VIEW APP_H.SALES_UV AS
SELECT SALE_ID, SOLD_ON, REGION
FROM APP.SALES
UNION ALL
SELECT gl_staged.SALE_ID, gl_staged.SOLD_ON, gl_staged.REGION
FROM APP_H.SALES_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP.SALES gl_app
    WHERE gl_app.SALE_ID = gl_staged.SALE_ID AND gl_app.SOLD_ON = gl_staged.SOLD_ON
)
/
COMMENT ON TABLE APP_H.SALES_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_updatable_view
DROP VIEW APP_H.SALES_UV

-- case: UPDATABLE_CHANGELOG create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.SALES_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.SALES_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.SALES gl_app
      WHERE gl_app.SALE_ID = :NEW.SALE_ID AND gl_app.SOLD_ON = :NEW.SOLD_ON AND ROWNUM = 1;
    INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
      VALUES (APP_H.SALES_SEQ.NEXTVAL, 'I', 'V', :NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.SALES_LK gl_staged
        WHERE (gl_staged.SALE_ID = :NEW.SALE_ID AND gl_staged.SOLD_ON = :NEW.SOLD_ON);
      INSERT INTO APP_H.SALES_LK (SALE_ID, SOLD_ON, REGION)
        VALUES (:NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    END IF;
  ELSIF UPDATING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.SALES gl_app
      WHERE gl_app.SALE_ID = :OLD.SALE_ID AND gl_app.SOLD_ON = :OLD.SOLD_ON AND ROWNUM = 1;
    IF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
        AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))) THEN
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, 'D', 'V', :OLD.SALE_ID, :OLD.SOLD_ON);
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, 'I', 'V', :NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    ELSIF NOT (((:NEW.SALE_ID IS NULL AND :OLD.SALE_ID IS NULL) OR (:NEW.SALE_ID IS NOT NULL AND :OLD.SALE_ID IS NOT NULL AND :NEW.SALE_ID = :OLD.SALE_ID))
        AND ((:NEW.SOLD_ON IS NULL AND :OLD.SOLD_ON IS NULL) OR (:NEW.SOLD_ON IS NOT NULL AND :OLD.SOLD_ON IS NOT NULL AND :NEW.SOLD_ON = :OLD.SOLD_ON))
        AND ((:NEW.REGION IS NULL AND :OLD.REGION IS NULL) OR (:NEW.REGION IS NOT NULL AND :OLD.REGION IS NOT NULL AND :NEW.REGION = :OLD.REGION))) THEN
      INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
        VALUES (APP_H.SALES_SEQ.NEXTVAL, 'U', 'V', :NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    END IF;
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.SALES_LK gl_staged
        WHERE (gl_staged.SALE_ID = :OLD.SALE_ID AND gl_staged.SOLD_ON = :OLD.SOLD_ON) OR (gl_staged.SALE_ID = :NEW.SALE_ID AND gl_staged.SOLD_ON = :NEW.SOLD_ON);
      INSERT INTO APP_H.SALES_LK (SALE_ID, SOLD_ON, REGION)
        VALUES (:NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    END IF;
  ELSIF DELETING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.SALES gl_app
      WHERE gl_app.SALE_ID = :OLD.SALE_ID AND gl_app.SOLD_ON = :OLD.SOLD_ON AND ROWNUM = 1;
    INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON)
      VALUES (APP_H.SALES_SEQ.NEXTVAL, 'D', 'V', :OLD.SALE_ID, :OLD.SOLD_ON);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.SALES_LK gl_staged
        WHERE (gl_staged.SALE_ID = :OLD.SALE_ID AND gl_staged.SOLD_ON = :OLD.SOLD_ON);
    END IF;
  END IF;
END;

-- case: UPDATABLE_CHANGELOG drop_updatable_trigger
DROP TRIGGER APP_H.SALES_UV

-- case: UPDATABLE_INSERT create_changelog_sequence
CREATE SEQUENCE APP_H.SALES_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE_INSERT drop_changelog_sequence
DROP SEQUENCE APP_H.SALES_SEQ

-- case: UPDATABLE_INSERT create_changelog_table
CREATE TABLE APP_H.SALES_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    SALE_ID NUMBER,
    SOLD_ON DATE,
    REGION VARCHAR2(4000)
)
/
COMMENT ON TABLE APP_H.SALES_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_changelog_table
DROP TABLE APP_H.SALES_LOG PURGE

-- case: UPDATABLE_INSERT create_lake_rows_table
CREATE TABLE APP_H.SALES_LK (
    SALE_ID NUMBER(10),
    SOLD_ON DATE,
    REGION VARCHAR2(10)
)
/
CREATE INDEX APP_H.SALES_LK_IX
ON APP_H.SALES_LK (SALE_ID, SOLD_ON)
/
COMMENT ON TABLE APP_H.SALES_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_lake_rows_table
DROP TABLE APP_H.SALES_LK PURGE

-- case: UPDATABLE_INSERT create_updatable_view
GRANT SELECT ON APP.SALES TO APP_H
/
CREATE OR REPLACE VIEW APP_H.SALES_UV AS
SELECT SALE_ID, SOLD_ON, REGION
FROM APP.SALES
UNION ALL
SELECT gl_staged.SALE_ID, gl_staged.SOLD_ON, gl_staged.REGION
FROM APP_H.SALES_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP.SALES gl_app
    WHERE gl_app.SALE_ID = gl_staged.SALE_ID AND gl_app.SOLD_ON = gl_staged.SOLD_ON
)
/
COMMENT ON TABLE APP_H.SALES_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_updatable_view
DROP VIEW APP_H.SALES_UV

-- case: UPDATABLE_INSERT create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.SALES_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.SALES_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
  gl_staged_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.SALES gl_app
      WHERE gl_app.SALE_ID = :NEW.SALE_ID AND gl_app.SOLD_ON = :NEW.SOLD_ON AND ROWNUM = 1;
    SELECT COUNT(*) INTO gl_staged_rows FROM APP_H.SALES_LK gl_staged
      WHERE gl_staged.SALE_ID = :NEW.SALE_ID AND gl_staged.SOLD_ON = :NEW.SOLD_ON AND ROWNUM = 1;
    IF gl_app_rows + gl_staged_rows > 0 THEN
      RAISE_APPLICATION_ERROR(-20002, 'INSERT through APP_H.SALES_UV: the view already shows a row with this key (this method only adds rows)');
    END IF;
    INSERT INTO APP_H.SALES_LOG (gl_seq, gl_op, gl_origin, SALE_ID, SOLD_ON, REGION)
      VALUES (APP_H.SALES_SEQ.NEXTVAL, 'I', 'V', :NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.SALES_LK gl_staged
        WHERE (gl_staged.SALE_ID = :NEW.SALE_ID AND gl_staged.SOLD_ON = :NEW.SOLD_ON);
      INSERT INTO APP_H.SALES_LK (SALE_ID, SOLD_ON, REGION)
        VALUES (:NEW.SALE_ID, :NEW.SOLD_ON, :NEW.REGION);
    END IF;
  ELSIF UPDATING THEN
    RAISE_APPLICATION_ERROR(-20001, 'UPDATE through APP_H.SALES_UV is not captured (only INSERT)');
  ELSIF DELETING THEN
    RAISE_APPLICATION_ERROR(-20001, 'DELETE through APP_H.SALES_UV is not captured (only INSERT)');
  END IF;
END;

-- case: UPDATABLE_INSERT drop_updatable_trigger
DROP TRIGGER APP_H.SALES_UV
