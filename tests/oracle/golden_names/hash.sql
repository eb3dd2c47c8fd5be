-- case: CHANGELOG create_changelog_sequence
CREATE SEQUENCE APP_H.A#B_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: CHANGELOG drop_changelog_sequence
DROP SEQUENCE APP_H.A#B_SEQ

-- case: CHANGELOG create_changelog_table
CREATE TABLE APP_H.A#B_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    ID NUMBER,
    QTY# NUMBER
)
/
COMMENT ON TABLE APP_H.A#B_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: CHANGELOG drop_changelog_table
DROP TABLE APP_H.A#B_LOG PURGE

-- case: CHANGELOG create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.A#B_CT
FOR INSERT OR UPDATE OR DELETE ON APP.A#B
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:
  TYPE gl_key IS RECORD (ID APP.A#B.ID%TYPE);
  TYPE gl_keys IS TABLE OF gl_key;
  gl_moved gl_keys := gl_keys();
  gl_old gl_key;
  gl_held PLS_INTEGER;
  TYPE gl_kinds IS TABLE OF CHAR(1);
  gl_kind gl_kinds := gl_kinds();
  TYPE gl_t1 IS TABLE OF APP_H.A#B_LOG.ID%TYPE;
  gl_c1 gl_t1 := gl_t1();
  TYPE gl_t2 IS TABLE OF APP_H.A#B_LOG.QTY#%TYPE;
  gl_c2 gl_t2 := gl_t2();
  gl_count PLS_INTEGER := 0;

  PROCEDURE gl_empty IS
  BEGIN
    gl_count := 0;
    gl_kind := gl_kinds();
    gl_c1 := gl_t1();
    gl_c2 := gl_t2();
  END gl_empty;

  PROCEDURE gl_flush IS
  BEGIN
    FORALL gl_i IN 1 .. gl_count
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, gl_kind(gl_i), 'T', gl_c1(gl_i), gl_c2(gl_i));
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
      gl_c1(gl_count) := :NEW.ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :NEW.QTY#;
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    ELSIF UPDATING THEN
      IF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))) THEN
        gl_moved.EXTEND;
        gl_moved(gl_moved.LAST).ID := :OLD.ID;
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'I';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.QTY#;
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      ELSIF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))
          AND ((:NEW.QTY# IS NULL AND :OLD.QTY# IS NULL) OR (:NEW.QTY# IS NOT NULL AND :OLD.QTY# IS NOT NULL AND :NEW.QTY# = :OLD.QTY#))) THEN
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'U';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.QTY#;
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      END IF;
    ELSIF DELETING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'D';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :OLD.ID;
      gl_c2.EXTEND;
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
      SELECT COUNT(*) INTO gl_held FROM APP.A#B gl_app
        WHERE gl_app.ID = gl_old.ID AND ROWNUM = 1;
      IF gl_held = 0 THEN
        INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID)
          VALUES (APP_H.A#B_SEQ.NEXTVAL, 'D', 'T', gl_old.ID);
      END IF;
    END LOOP;
  END AFTER STATEMENT;
END;

-- case: CHANGELOG drop_changelog_trigger
DROP TRIGGER APP_H.A#B_CT

-- case: CHANGELOG_INSERT create_changelog_sequence
CREATE SEQUENCE APP_H.A#B_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: CHANGELOG_INSERT drop_changelog_sequence
DROP SEQUENCE APP_H.A#B_SEQ

-- case: CHANGELOG_INSERT create_changelog_table
CREATE TABLE APP_H.A#B_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    ID NUMBER,
    QTY# NUMBER
)
/
COMMENT ON TABLE APP_H.A#B_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: CHANGELOG_INSERT drop_changelog_table
DROP TABLE APP_H.A#B_LOG PURGE

-- case: CHANGELOG_INSERT create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.A#B_CT
FOR INSERT OR UPDATE OR DELETE ON APP.A#B
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:

  AFTER EACH ROW IS
  BEGIN
    IF INSERTING THEN
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, 'I', 'T', :NEW.ID, :NEW.QTY#);
    ELSIF UPDATING THEN
      IF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))
          AND ((:NEW.QTY# IS NULL AND :OLD.QTY# IS NULL) OR (:NEW.QTY# IS NOT NULL AND :OLD.QTY# IS NOT NULL AND :NEW.QTY# = :OLD.QTY#))) THEN
        INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID)
          VALUES (APP_H.A#B_SEQ.NEXTVAL, 'U', 'T', :OLD.ID);
      END IF;
    ELSIF DELETING THEN
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, 'D', 'T', :OLD.ID);
    END IF;
  END AFTER EACH ROW;
END;

-- case: CHANGELOG_INSERT drop_changelog_trigger
DROP TRIGGER APP_H.A#B_CT

-- case: UPDATABLE create_changelog_sequence
CREATE SEQUENCE APP_H.A#B_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE drop_changelog_sequence
DROP SEQUENCE APP_H.A#B_SEQ

-- case: UPDATABLE create_changelog_table
CREATE TABLE APP_H.A#B_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    ID NUMBER,
    QTY# NUMBER
)
/
COMMENT ON TABLE APP_H.A#B_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_changelog_table
DROP TABLE APP_H.A#B_LOG PURGE

-- case: UPDATABLE create_lake_rows_table
CREATE TABLE APP_H.A#B_LK (
    ID NUMBER(10),
    QTY# NUMBER(12,2)
)
/
CREATE INDEX APP_H.A#B_LK_IX
ON APP_H.A#B_LK (ID)
/
COMMENT ON TABLE APP_H.A#B_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_lake_rows_table
DROP TABLE APP_H.A#B_LK PURGE

-- case: UPDATABLE create_updatable_view
GRANT SELECT ON APP.A#B TO APP_H
/
CREATE OR REPLACE VIEW APP_H.A#B_UV AS
SELECT ID, QTY#
FROM APP.A#B
UNION ALL
SELECT gl_staged.ID, gl_staged.QTY#
FROM APP_H.A#B_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP.A#B gl_app
    WHERE gl_app.ID = gl_staged.ID
)
/
COMMENT ON TABLE APP_H.A#B_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_updatable_view
DROP VIEW APP_H.A#B_UV

-- case: UPDATABLE create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.A#B_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.A#B_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.A#B gl_app
      WHERE gl_app.ID = :NEW.ID AND ROWNUM = 1;
    INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
      VALUES (APP_H.A#B_SEQ.NEXTVAL, 'I', 'V', :NEW.ID, :NEW.QTY#);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.A#B_LK gl_staged
        WHERE (gl_staged.ID = :NEW.ID);
      INSERT INTO APP_H.A#B_LK (ID, QTY#)
        VALUES (:NEW.ID, :NEW.QTY#);
    END IF;
  ELSIF UPDATING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.A#B gl_app
      WHERE gl_app.ID = :OLD.ID AND ROWNUM = 1;
    IF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))) THEN
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, 'D', 'V', :OLD.ID);
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, 'I', 'V', :NEW.ID, :NEW.QTY#);
    ELSIF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))
        AND ((:NEW.QTY# IS NULL AND :OLD.QTY# IS NULL) OR (:NEW.QTY# IS NOT NULL AND :OLD.QTY# IS NOT NULL AND :NEW.QTY# = :OLD.QTY#))) THEN
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, 'U', 'V', :NEW.ID, :NEW.QTY#);
    END IF;
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.A#B_LK gl_staged
        WHERE (gl_staged.ID = :OLD.ID) OR (gl_staged.ID = :NEW.ID);
      INSERT INTO APP_H.A#B_LK (ID, QTY#)
        VALUES (:NEW.ID, :NEW.QTY#);
    END IF;
  ELSIF DELETING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.A#B gl_app
      WHERE gl_app.ID = :OLD.ID AND ROWNUM = 1;
    INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID)
      VALUES (APP_H.A#B_SEQ.NEXTVAL, 'D', 'V', :OLD.ID);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.A#B_LK gl_staged
        WHERE (gl_staged.ID = :OLD.ID);
    END IF;
  END IF;
END;

-- case: UPDATABLE drop_updatable_trigger
DROP TRIGGER APP_H.A#B_UV

-- case: UPDATABLE_CHANGELOG create_changelog_sequence
CREATE SEQUENCE APP_H.A#B_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE_CHANGELOG drop_changelog_sequence
DROP SEQUENCE APP_H.A#B_SEQ

-- case: UPDATABLE_CHANGELOG create_changelog_table
CREATE TABLE APP_H.A#B_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    ID NUMBER,
    QTY# NUMBER
)
/
COMMENT ON TABLE APP_H.A#B_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_changelog_table
DROP TABLE APP_H.A#B_LOG PURGE

-- case: UPDATABLE_CHANGELOG create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.A#B_CT
FOR INSERT OR UPDATE OR DELETE ON APP.A#B
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:
  TYPE gl_key IS RECORD (ID APP.A#B.ID%TYPE);
  TYPE gl_keys IS TABLE OF gl_key;
  gl_moved gl_keys := gl_keys();
  gl_old gl_key;
  gl_held PLS_INTEGER;
  TYPE gl_kinds IS TABLE OF CHAR(1);
  gl_kind gl_kinds := gl_kinds();
  TYPE gl_t1 IS TABLE OF APP_H.A#B_LOG.ID%TYPE;
  gl_c1 gl_t1 := gl_t1();
  TYPE gl_t2 IS TABLE OF APP_H.A#B_LOG.QTY#%TYPE;
  gl_c2 gl_t2 := gl_t2();
  gl_count PLS_INTEGER := 0;

  PROCEDURE gl_empty IS
  BEGIN
    gl_count := 0;
    gl_kind := gl_kinds();
    gl_c1 := gl_t1();
    gl_c2 := gl_t2();
  END gl_empty;

  PROCEDURE gl_flush IS
  BEGIN
    FORALL gl_i IN 1 .. gl_count
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, gl_kind(gl_i), 'T', gl_c1(gl_i), gl_c2(gl_i));
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
      gl_c1(gl_count) := :NEW.ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :NEW.QTY#;
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    ELSIF UPDATING THEN
      IF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))) THEN
        gl_moved.EXTEND;
        gl_moved(gl_moved.LAST).ID := :OLD.ID;
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'I';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.QTY#;
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      ELSIF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))
          AND ((:NEW.QTY# IS NULL AND :OLD.QTY# IS NULL) OR (:NEW.QTY# IS NOT NULL AND :OLD.QTY# IS NOT NULL AND :NEW.QTY# = :OLD.QTY#))) THEN
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'U';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.QTY#;
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      END IF;
    ELSIF DELETING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'D';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :OLD.ID;
      gl_c2.EXTEND;
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
      SELECT COUNT(*) INTO gl_held FROM APP.A#B gl_app
        WHERE gl_app.ID = gl_old.ID AND ROWNUM = 1;
      IF gl_held = 0 THEN
        INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID)
          VALUES (APP_H.A#B_SEQ.NEXTVAL, 'D', 'T', gl_old.ID);
      END IF;
    END LOOP;
  END AFTER STATEMENT;
END;

-- case: UPDATABLE_CHANGELOG drop_changelog_trigger
DROP TRIGGER APP_H.A#B_CT

-- case: UPDATABLE_CHANGELOG create_lake_rows_table
CREATE TABLE APP_H.A#B_LK (
    ID NUMBER(10),
    QTY# NUMBER(12,2)
)
/
CREATE INDEX APP_H.A#B_LK_IX
ON APP_H.A#B_LK (ID)
/
COMMENT ON TABLE APP_H.A#B_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_lake_rows_table
DROP TABLE APP_H.A#B_LK PURGE

-- case: UPDATABLE_CHANGELOG create_updatable_view
GRANT SELECT ON APP.A#B TO APP_H
/
CREATE OR REPLACE VIEW APP_H.A#B_UV AS
SELECT ID, QTY#
FROM APP.A#B
UNION ALL
SELECT gl_staged.ID, gl_staged.QTY#
FROM APP_H.A#B_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP.A#B gl_app
    WHERE gl_app.ID = gl_staged.ID
)
/
COMMENT ON TABLE APP_H.A#B_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_updatable_view
DROP VIEW APP_H.A#B_UV

-- case: UPDATABLE_CHANGELOG create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.A#B_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.A#B_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.A#B gl_app
      WHERE gl_app.ID = :NEW.ID AND ROWNUM = 1;
    INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
      VALUES (APP_H.A#B_SEQ.NEXTVAL, 'I', 'V', :NEW.ID, :NEW.QTY#);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.A#B_LK gl_staged
        WHERE (gl_staged.ID = :NEW.ID);
      INSERT INTO APP_H.A#B_LK (ID, QTY#)
        VALUES (:NEW.ID, :NEW.QTY#);
    END IF;
  ELSIF UPDATING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.A#B gl_app
      WHERE gl_app.ID = :OLD.ID AND ROWNUM = 1;
    IF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))) THEN
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, 'D', 'V', :OLD.ID);
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, 'I', 'V', :NEW.ID, :NEW.QTY#);
    ELSIF NOT (((:NEW.ID IS NULL AND :OLD.ID IS NULL) OR (:NEW.ID IS NOT NULL AND :OLD.ID IS NOT NULL AND :NEW.ID = :OLD.ID))
        AND ((:NEW.QTY# IS NULL AND :OLD.QTY# IS NULL) OR (:NEW.QTY# IS NOT NULL AND :OLD.QTY# IS NOT NULL AND :NEW.QTY# = :OLD.QTY#))) THEN
      INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
        VALUES (APP_H.A#B_SEQ.NEXTVAL, 'U', 'V', :NEW.ID, :NEW.QTY#);
    END IF;
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.A#B_LK gl_staged
        WHERE (gl_staged.ID = :OLD.ID) OR (gl_staged.ID = :NEW.ID);
      INSERT INTO APP_H.A#B_LK (ID, QTY#)
        VALUES (:NEW.ID, :NEW.QTY#);
    END IF;
  ELSIF DELETING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.A#B gl_app
      WHERE gl_app.ID = :OLD.ID AND ROWNUM = 1;
    INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID)
      VALUES (APP_H.A#B_SEQ.NEXTVAL, 'D', 'V', :OLD.ID);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.A#B_LK gl_staged
        WHERE (gl_staged.ID = :OLD.ID);
    END IF;
  END IF;
END;

-- case: UPDATABLE_CHANGELOG drop_updatable_trigger
DROP TRIGGER APP_H.A#B_UV

-- case: UPDATABLE_INSERT create_changelog_sequence
CREATE SEQUENCE APP_H.A#B_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE_INSERT drop_changelog_sequence
DROP SEQUENCE APP_H.A#B_SEQ

-- case: UPDATABLE_INSERT create_changelog_table
CREATE TABLE APP_H.A#B_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    ID NUMBER,
    QTY# NUMBER
)
/
COMMENT ON TABLE APP_H.A#B_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_changelog_table
DROP TABLE APP_H.A#B_LOG PURGE

-- case: UPDATABLE_INSERT create_lake_rows_table
CREATE TABLE APP_H.A#B_LK (
    ID NUMBER(10),
    QTY# NUMBER(12,2)
)
/
CREATE INDEX APP_H.A#B_LK_IX
ON APP_H.A#B_LK (ID)
/
COMMENT ON TABLE APP_H.A#B_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_lake_rows_table
DROP TABLE APP_H.A#B_LK PURGE

-- case: UPDATABLE_INSERT create_updatable_view
GRANT SELECT ON APP.A#B TO APP_H
/
CREATE OR REPLACE VIEW APP_H.A#B_UV AS
SELECT ID, QTY#
FROM APP.A#B
UNION ALL
SELECT gl_staged.ID, gl_staged.QTY#
FROM APP_H.A#B_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP.A#B gl_app
    WHERE gl_app.ID = gl_staged.ID
)
/
COMMENT ON TABLE APP_H.A#B_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_updatable_view
DROP VIEW APP_H.A#B_UV

-- case: UPDATABLE_INSERT create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.A#B_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.A#B_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
  gl_staged_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP.A#B gl_app
      WHERE gl_app.ID = :NEW.ID AND ROWNUM = 1;
    SELECT COUNT(*) INTO gl_staged_rows FROM APP_H.A#B_LK gl_staged
      WHERE gl_staged.ID = :NEW.ID AND ROWNUM = 1;
    IF gl_app_rows + gl_staged_rows > 0 THEN
      RAISE_APPLICATION_ERROR(-20002, 'INSERT through APP_H.A#B_UV: the view already shows a row with this key (this method only adds rows)');
    END IF;
    INSERT INTO APP_H.A#B_LOG (gl_seq, gl_op, gl_origin, ID, QTY#)
      VALUES (APP_H.A#B_SEQ.NEXTVAL, 'I', 'V', :NEW.ID, :NEW.QTY#);
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.A#B_LK gl_staged
        WHERE (gl_staged.ID = :NEW.ID);
      INSERT INTO APP_H.A#B_LK (ID, QTY#)
        VALUES (:NEW.ID, :NEW.QTY#);
    END IF;
  ELSIF UPDATING THEN
    RAISE_APPLICATION_ERROR(-20001, 'UPDATE through APP_H.A#B_UV is not captured (only INSERT)');
  ELSIF DELETING THEN
    RAISE_APPLICATION_ERROR(-20001, 'DELETE through APP_H.A#B_UV is not captured (only INSERT)');
  END IF;
END;

-- case: UPDATABLE_INSERT drop_updatable_trigger
DROP TRIGGER APP_H.A#B_UV
