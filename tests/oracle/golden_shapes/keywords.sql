-- case: CHANGELOG create_changelog_sequence
CREATE SEQUENCE APP_H.ORDER_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: CHANGELOG drop_changelog_sequence
DROP SEQUENCE APP_H.ORDER_SEQ

-- case: CHANGELOG create_changelog_table
CREATE TABLE APP_H.ORDER_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    "SELECT" NUMBER,
    "USER" VARCHAR2(4000),
    "FROM" NUMBER,
    "LEVEL" DATE
)
/
COMMENT ON TABLE APP_H.ORDER_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: CHANGELOG drop_changelog_table
DROP TABLE APP_H.ORDER_LOG PURGE

-- case: CHANGELOG create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.ORDER_CT
FOR INSERT OR UPDATE OR DELETE ON APP."ORDER"
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:
  TYPE gl_key IS RECORD ("SELECT" APP."ORDER"."SELECT"%TYPE, "USER" APP."ORDER"."USER"%TYPE);
  TYPE gl_keys IS TABLE OF gl_key;
  gl_moved gl_keys := gl_keys();
  gl_old gl_key;
  gl_held PLS_INTEGER;
  TYPE gl_kinds IS TABLE OF CHAR(1);
  gl_kind gl_kinds := gl_kinds();
  TYPE gl_t1 IS TABLE OF APP_H.ORDER_LOG."SELECT"%TYPE;
  gl_c1 gl_t1 := gl_t1();
  TYPE gl_t2 IS TABLE OF APP_H.ORDER_LOG."USER"%TYPE;
  gl_c2 gl_t2 := gl_t2();
  TYPE gl_t3 IS TABLE OF APP_H.ORDER_LOG."FROM"%TYPE;
  gl_c3 gl_t3 := gl_t3();
  TYPE gl_t4 IS TABLE OF APP_H.ORDER_LOG."LEVEL"%TYPE;
  gl_c4 gl_t4 := gl_t4();
  gl_count PLS_INTEGER := 0;

  PROCEDURE gl_empty IS
  BEGIN
    gl_count := 0;
    gl_kind := gl_kinds();
    gl_c1 := gl_t1();
    gl_c2 := gl_t2();
    gl_c3 := gl_t3();
    gl_c4 := gl_t4();
  END gl_empty;

  PROCEDURE gl_flush IS
  BEGIN
    FORALL gl_i IN 1 .. gl_count
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, gl_kind(gl_i), 'T', gl_c1(gl_i), gl_c2(gl_i), gl_c3(gl_i), gl_c4(gl_i));
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
      gl_c1(gl_count) := :NEW."SELECT";
      gl_c2.EXTEND;
      gl_c2(gl_count) := :NEW."USER";
      gl_c3.EXTEND;
      gl_c3(gl_count) := :NEW."FROM";
      gl_c4.EXTEND;
      gl_c4(gl_count) := :NEW."LEVEL";
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    ELSIF UPDATING THEN
      IF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
          AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))) THEN
        gl_moved.EXTEND;
        gl_moved(gl_moved.LAST)."SELECT" := :OLD."SELECT";
        gl_moved(gl_moved.LAST)."USER" := :OLD."USER";
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'I';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW."SELECT";
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW."USER";
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW."FROM";
        gl_c4.EXTEND;
        gl_c4(gl_count) := :NEW."LEVEL";
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      ELSIF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
          AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))
          AND ((:NEW."FROM" IS NULL AND :OLD."FROM" IS NULL) OR (:NEW."FROM" IS NOT NULL AND :OLD."FROM" IS NOT NULL AND :NEW."FROM" = :OLD."FROM"))
          AND ((:NEW."LEVEL" IS NULL AND :OLD."LEVEL" IS NULL) OR (:NEW."LEVEL" IS NOT NULL AND :OLD."LEVEL" IS NOT NULL AND :NEW."LEVEL" = :OLD."LEVEL"))) THEN
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'U';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW."SELECT";
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW."USER";
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW."FROM";
        gl_c4.EXTEND;
        gl_c4(gl_count) := :NEW."LEVEL";
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      END IF;
    ELSIF DELETING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'D';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :OLD."SELECT";
      gl_c2.EXTEND;
      gl_c2(gl_count) := :OLD."USER";
      gl_c3.EXTEND;
      gl_c4.EXTEND;
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
      SELECT COUNT(*) INTO gl_held FROM APP."ORDER" gl_app
        WHERE gl_app."SELECT" = gl_old."SELECT" AND gl_app."USER" = gl_old."USER" AND ROWNUM = 1;
      IF gl_held = 0 THEN
        INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER")
          VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'D', 'T', gl_old."SELECT", gl_old."USER");
      END IF;
    END LOOP;
  END AFTER STATEMENT;
END;

-- case: CHANGELOG drop_changelog_trigger
DROP TRIGGER APP_H.ORDER_CT

-- case: CHANGELOG_INSERT create_changelog_sequence
CREATE SEQUENCE APP_H.ORDER_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: CHANGELOG_INSERT drop_changelog_sequence
DROP SEQUENCE APP_H.ORDER_SEQ

-- case: CHANGELOG_INSERT create_changelog_table
CREATE TABLE APP_H.ORDER_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    "SELECT" NUMBER,
    "USER" VARCHAR2(4000),
    "FROM" NUMBER,
    "LEVEL" DATE
)
/
COMMENT ON TABLE APP_H.ORDER_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: CHANGELOG_INSERT drop_changelog_table
DROP TABLE APP_H.ORDER_LOG PURGE

-- case: CHANGELOG_INSERT create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.ORDER_CT
FOR INSERT OR UPDATE OR DELETE ON APP."ORDER"
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:

  AFTER EACH ROW IS
  BEGIN
    IF INSERTING THEN
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'I', 'T', :NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    ELSIF UPDATING THEN
      IF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
          AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))
          AND ((:NEW."FROM" IS NULL AND :OLD."FROM" IS NULL) OR (:NEW."FROM" IS NOT NULL AND :OLD."FROM" IS NOT NULL AND :NEW."FROM" = :OLD."FROM"))
          AND ((:NEW."LEVEL" IS NULL AND :OLD."LEVEL" IS NULL) OR (:NEW."LEVEL" IS NOT NULL AND :OLD."LEVEL" IS NOT NULL AND :NEW."LEVEL" = :OLD."LEVEL"))) THEN
        INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER")
          VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'U', 'T', :OLD."SELECT", :OLD."USER");
      END IF;
    ELSIF DELETING THEN
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'D', 'T', :OLD."SELECT", :OLD."USER");
    END IF;
  END AFTER EACH ROW;
END;

-- case: CHANGELOG_INSERT drop_changelog_trigger
DROP TRIGGER APP_H.ORDER_CT

-- case: UPDATABLE create_changelog_sequence
CREATE SEQUENCE APP_H.ORDER_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE drop_changelog_sequence
DROP SEQUENCE APP_H.ORDER_SEQ

-- case: UPDATABLE create_changelog_table
CREATE TABLE APP_H.ORDER_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    "SELECT" NUMBER,
    "USER" VARCHAR2(4000),
    "FROM" NUMBER,
    "LEVEL" DATE
)
/
COMMENT ON TABLE APP_H.ORDER_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_changelog_table
DROP TABLE APP_H.ORDER_LOG PURGE

-- case: UPDATABLE create_lake_rows_table
CREATE TABLE APP_H.ORDER_LK (
    "SELECT" NUMBER(10),
    "USER" VARCHAR2(10),
    "FROM" NUMBER(12,2),
    "LEVEL" DATE
)
/
CREATE INDEX APP_H.ORDER_LK_IX
ON APP_H.ORDER_LK ("SELECT", "USER")
/
COMMENT ON TABLE APP_H.ORDER_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_lake_rows_table
DROP TABLE APP_H.ORDER_LK PURGE

-- case: UPDATABLE create_updatable_view
GRANT SELECT ON APP."ORDER" TO APP_H
/
CREATE OR REPLACE VIEW APP_H.ORDER_UV AS
SELECT "SELECT", "USER", "FROM", "LEVEL"
FROM APP."ORDER"
UNION ALL
SELECT gl_staged."SELECT", gl_staged."USER", gl_staged."FROM", gl_staged."LEVEL"
FROM APP_H.ORDER_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP."ORDER" gl_app
    WHERE gl_app."SELECT" = gl_staged."SELECT" AND gl_app."USER" = gl_staged."USER"
)
/
COMMENT ON TABLE APP_H.ORDER_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE drop_updatable_view
DROP VIEW APP_H.ORDER_UV

-- case: UPDATABLE create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.ORDER_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.ORDER_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP."ORDER" gl_app
      WHERE gl_app."SELECT" = :NEW."SELECT" AND gl_app."USER" = :NEW."USER" AND ROWNUM = 1;
    INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
      VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'I', 'V', :NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.ORDER_LK gl_staged
        WHERE (gl_staged."SELECT" = :NEW."SELECT" AND gl_staged."USER" = :NEW."USER");
      INSERT INTO APP_H.ORDER_LK ("SELECT", "USER", "FROM", "LEVEL")
        VALUES (:NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    END IF;
  ELSIF UPDATING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP."ORDER" gl_app
      WHERE gl_app."SELECT" = :OLD."SELECT" AND gl_app."USER" = :OLD."USER" AND ROWNUM = 1;
    IF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
        AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))) THEN
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'D', 'V', :OLD."SELECT", :OLD."USER");
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'I', 'V', :NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    ELSIF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
        AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))
        AND ((:NEW."FROM" IS NULL AND :OLD."FROM" IS NULL) OR (:NEW."FROM" IS NOT NULL AND :OLD."FROM" IS NOT NULL AND :NEW."FROM" = :OLD."FROM"))
        AND ((:NEW."LEVEL" IS NULL AND :OLD."LEVEL" IS NULL) OR (:NEW."LEVEL" IS NOT NULL AND :OLD."LEVEL" IS NOT NULL AND :NEW."LEVEL" = :OLD."LEVEL"))) THEN
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'U', 'V', :NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    END IF;
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.ORDER_LK gl_staged
        WHERE (gl_staged."SELECT" = :OLD."SELECT" AND gl_staged."USER" = :OLD."USER") OR (gl_staged."SELECT" = :NEW."SELECT" AND gl_staged."USER" = :NEW."USER");
      INSERT INTO APP_H.ORDER_LK ("SELECT", "USER", "FROM", "LEVEL")
        VALUES (:NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    END IF;
  ELSIF DELETING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP."ORDER" gl_app
      WHERE gl_app."SELECT" = :OLD."SELECT" AND gl_app."USER" = :OLD."USER" AND ROWNUM = 1;
    INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER")
      VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'D', 'V', :OLD."SELECT", :OLD."USER");
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.ORDER_LK gl_staged
        WHERE (gl_staged."SELECT" = :OLD."SELECT" AND gl_staged."USER" = :OLD."USER");
    END IF;
  END IF;
END;

-- case: UPDATABLE drop_updatable_trigger
DROP TRIGGER APP_H.ORDER_UV

-- case: UPDATABLE_CHANGELOG create_changelog_sequence
CREATE SEQUENCE APP_H.ORDER_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE_CHANGELOG drop_changelog_sequence
DROP SEQUENCE APP_H.ORDER_SEQ

-- case: UPDATABLE_CHANGELOG create_changelog_table
CREATE TABLE APP_H.ORDER_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    "SELECT" NUMBER,
    "USER" VARCHAR2(4000),
    "FROM" NUMBER,
    "LEVEL" DATE
)
/
COMMENT ON TABLE APP_H.ORDER_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_changelog_table
DROP TABLE APP_H.ORDER_LOG PURGE

-- case: UPDATABLE_CHANGELOG create_changelog_trigger
CREATE OR REPLACE TRIGGER APP_H.ORDER_CT
FOR INSERT OR UPDATE OR DELETE ON APP."ORDER"
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:
  TYPE gl_key IS RECORD ("SELECT" APP."ORDER"."SELECT"%TYPE, "USER" APP."ORDER"."USER"%TYPE);
  TYPE gl_keys IS TABLE OF gl_key;
  gl_moved gl_keys := gl_keys();
  gl_old gl_key;
  gl_held PLS_INTEGER;
  TYPE gl_kinds IS TABLE OF CHAR(1);
  gl_kind gl_kinds := gl_kinds();
  TYPE gl_t1 IS TABLE OF APP_H.ORDER_LOG."SELECT"%TYPE;
  gl_c1 gl_t1 := gl_t1();
  TYPE gl_t2 IS TABLE OF APP_H.ORDER_LOG."USER"%TYPE;
  gl_c2 gl_t2 := gl_t2();
  TYPE gl_t3 IS TABLE OF APP_H.ORDER_LOG."FROM"%TYPE;
  gl_c3 gl_t3 := gl_t3();
  TYPE gl_t4 IS TABLE OF APP_H.ORDER_LOG."LEVEL"%TYPE;
  gl_c4 gl_t4 := gl_t4();
  gl_count PLS_INTEGER := 0;

  PROCEDURE gl_empty IS
  BEGIN
    gl_count := 0;
    gl_kind := gl_kinds();
    gl_c1 := gl_t1();
    gl_c2 := gl_t2();
    gl_c3 := gl_t3();
    gl_c4 := gl_t4();
  END gl_empty;

  PROCEDURE gl_flush IS
  BEGIN
    FORALL gl_i IN 1 .. gl_count
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, gl_kind(gl_i), 'T', gl_c1(gl_i), gl_c2(gl_i), gl_c3(gl_i), gl_c4(gl_i));
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
      gl_c1(gl_count) := :NEW."SELECT";
      gl_c2.EXTEND;
      gl_c2(gl_count) := :NEW."USER";
      gl_c3.EXTEND;
      gl_c3(gl_count) := :NEW."FROM";
      gl_c4.EXTEND;
      gl_c4(gl_count) := :NEW."LEVEL";
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    ELSIF UPDATING THEN
      IF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
          AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))) THEN
        gl_moved.EXTEND;
        gl_moved(gl_moved.LAST)."SELECT" := :OLD."SELECT";
        gl_moved(gl_moved.LAST)."USER" := :OLD."USER";
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'I';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW."SELECT";
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW."USER";
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW."FROM";
        gl_c4.EXTEND;
        gl_c4(gl_count) := :NEW."LEVEL";
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      ELSIF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
          AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))
          AND ((:NEW."FROM" IS NULL AND :OLD."FROM" IS NULL) OR (:NEW."FROM" IS NOT NULL AND :OLD."FROM" IS NOT NULL AND :NEW."FROM" = :OLD."FROM"))
          AND ((:NEW."LEVEL" IS NULL AND :OLD."LEVEL" IS NULL) OR (:NEW."LEVEL" IS NOT NULL AND :OLD."LEVEL" IS NOT NULL AND :NEW."LEVEL" = :OLD."LEVEL"))) THEN
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'U';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW."SELECT";
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW."USER";
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW."FROM";
        gl_c4.EXTEND;
        gl_c4(gl_count) := :NEW."LEVEL";
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      END IF;
    ELSIF DELETING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'D';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :OLD."SELECT";
      gl_c2.EXTEND;
      gl_c2(gl_count) := :OLD."USER";
      gl_c3.EXTEND;
      gl_c4.EXTEND;
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
      SELECT COUNT(*) INTO gl_held FROM APP."ORDER" gl_app
        WHERE gl_app."SELECT" = gl_old."SELECT" AND gl_app."USER" = gl_old."USER" AND ROWNUM = 1;
      IF gl_held = 0 THEN
        INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER")
          VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'D', 'T', gl_old."SELECT", gl_old."USER");
      END IF;
    END LOOP;
  END AFTER STATEMENT;
END;

-- case: UPDATABLE_CHANGELOG drop_changelog_trigger
DROP TRIGGER APP_H.ORDER_CT

-- case: UPDATABLE_CHANGELOG create_lake_rows_table
CREATE TABLE APP_H.ORDER_LK (
    "SELECT" NUMBER(10),
    "USER" VARCHAR2(10),
    "FROM" NUMBER(12,2),
    "LEVEL" DATE
)
/
CREATE INDEX APP_H.ORDER_LK_IX
ON APP_H.ORDER_LK ("SELECT", "USER")
/
COMMENT ON TABLE APP_H.ORDER_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_lake_rows_table
DROP TABLE APP_H.ORDER_LK PURGE

-- case: UPDATABLE_CHANGELOG create_updatable_view
GRANT SELECT ON APP."ORDER" TO APP_H
/
CREATE OR REPLACE VIEW APP_H.ORDER_UV AS
SELECT "SELECT", "USER", "FROM", "LEVEL"
FROM APP."ORDER"
UNION ALL
SELECT gl_staged."SELECT", gl_staged."USER", gl_staged."FROM", gl_staged."LEVEL"
FROM APP_H.ORDER_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP."ORDER" gl_app
    WHERE gl_app."SELECT" = gl_staged."SELECT" AND gl_app."USER" = gl_staged."USER"
)
/
COMMENT ON TABLE APP_H.ORDER_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_CHANGELOG drop_updatable_view
DROP VIEW APP_H.ORDER_UV

-- case: UPDATABLE_CHANGELOG create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.ORDER_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.ORDER_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP."ORDER" gl_app
      WHERE gl_app."SELECT" = :NEW."SELECT" AND gl_app."USER" = :NEW."USER" AND ROWNUM = 1;
    INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
      VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'I', 'V', :NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.ORDER_LK gl_staged
        WHERE (gl_staged."SELECT" = :NEW."SELECT" AND gl_staged."USER" = :NEW."USER");
      INSERT INTO APP_H.ORDER_LK ("SELECT", "USER", "FROM", "LEVEL")
        VALUES (:NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    END IF;
  ELSIF UPDATING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP."ORDER" gl_app
      WHERE gl_app."SELECT" = :OLD."SELECT" AND gl_app."USER" = :OLD."USER" AND ROWNUM = 1;
    IF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
        AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))) THEN
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'D', 'V', :OLD."SELECT", :OLD."USER");
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'I', 'V', :NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    ELSIF NOT (((:NEW."SELECT" IS NULL AND :OLD."SELECT" IS NULL) OR (:NEW."SELECT" IS NOT NULL AND :OLD."SELECT" IS NOT NULL AND :NEW."SELECT" = :OLD."SELECT"))
        AND ((:NEW."USER" IS NULL AND :OLD."USER" IS NULL) OR (:NEW."USER" IS NOT NULL AND :OLD."USER" IS NOT NULL AND :NEW."USER" = :OLD."USER"))
        AND ((:NEW."FROM" IS NULL AND :OLD."FROM" IS NULL) OR (:NEW."FROM" IS NOT NULL AND :OLD."FROM" IS NOT NULL AND :NEW."FROM" = :OLD."FROM"))
        AND ((:NEW."LEVEL" IS NULL AND :OLD."LEVEL" IS NULL) OR (:NEW."LEVEL" IS NOT NULL AND :OLD."LEVEL" IS NOT NULL AND :NEW."LEVEL" = :OLD."LEVEL"))) THEN
      INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
        VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'U', 'V', :NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    END IF;
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.ORDER_LK gl_staged
        WHERE (gl_staged."SELECT" = :OLD."SELECT" AND gl_staged."USER" = :OLD."USER") OR (gl_staged."SELECT" = :NEW."SELECT" AND gl_staged."USER" = :NEW."USER");
      INSERT INTO APP_H.ORDER_LK ("SELECT", "USER", "FROM", "LEVEL")
        VALUES (:NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    END IF;
  ELSIF DELETING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP."ORDER" gl_app
      WHERE gl_app."SELECT" = :OLD."SELECT" AND gl_app."USER" = :OLD."USER" AND ROWNUM = 1;
    INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER")
      VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'D', 'V', :OLD."SELECT", :OLD."USER");
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.ORDER_LK gl_staged
        WHERE (gl_staged."SELECT" = :OLD."SELECT" AND gl_staged."USER" = :OLD."USER");
    END IF;
  END IF;
END;

-- case: UPDATABLE_CHANGELOG drop_updatable_trigger
DROP TRIGGER APP_H.ORDER_UV

-- case: UPDATABLE_INSERT create_changelog_sequence
CREATE SEQUENCE APP_H.ORDER_SEQ START WITH 1 INCREMENT BY 1 CACHE 1000 ORDER NOCYCLE

-- case: UPDATABLE_INSERT drop_changelog_sequence
DROP SEQUENCE APP_H.ORDER_SEQ

-- case: UPDATABLE_INSERT create_changelog_table
CREATE TABLE APP_H.ORDER_LOG (
    gl_seq NUMBER(19) NOT NULL PRIMARY KEY,
    gl_op CHAR(1) NOT NULL CHECK (gl_op IN ('I', 'U', 'D', 'T')),
    gl_origin CHAR(1) NOT NULL CHECK (gl_origin IN ('T', 'V')),
    gl_changed_at TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
    "SELECT" NUMBER,
    "USER" VARCHAR2(4000),
    "FROM" NUMBER,
    "LEVEL" DATE
)
/
COMMENT ON TABLE APP_H.ORDER_LOG IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_changelog_table
DROP TABLE APP_H.ORDER_LOG PURGE

-- case: UPDATABLE_INSERT create_lake_rows_table
CREATE TABLE APP_H.ORDER_LK (
    "SELECT" NUMBER(10),
    "USER" VARCHAR2(10),
    "FROM" NUMBER(12,2),
    "LEVEL" DATE
)
/
CREATE INDEX APP_H.ORDER_LK_IX
ON APP_H.ORDER_LK ("SELECT", "USER")
/
COMMENT ON TABLE APP_H.ORDER_LK IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_lake_rows_table
DROP TABLE APP_H.ORDER_LK PURGE

-- case: UPDATABLE_INSERT create_updatable_view
GRANT SELECT ON APP."ORDER" TO APP_H
/
CREATE OR REPLACE VIEW APP_H.ORDER_UV AS
SELECT "SELECT", "USER", "FROM", "LEVEL"
FROM APP."ORDER"
UNION ALL
SELECT gl_staged."SELECT", gl_staged."USER", gl_staged."FROM", gl_staged."LEVEL"
FROM APP_H.ORDER_LK gl_staged
WHERE NOT EXISTS (
    SELECT 1 FROM APP."ORDER" gl_app
    WHERE gl_app."SELECT" = gl_staged."SELECT" AND gl_app."USER" = gl_staged."USER"
)
/
COMMENT ON TABLE APP_H.ORDER_UV IS 'gluon:00000000000000000000000000000000:'

-- case: UPDATABLE_INSERT drop_updatable_view
DROP VIEW APP_H.ORDER_UV

-- case: UPDATABLE_INSERT create_updatable_trigger
CREATE OR REPLACE TRIGGER APP_H.ORDER_UV
INSTEAD OF INSERT OR UPDATE OR DELETE ON APP_H.ORDER_UV
FOR EACH ROW
DECLARE
  gl_app_rows PLS_INTEGER;
  gl_staged_rows PLS_INTEGER;
BEGIN
  -- gluon:00000000000000000000000000000000:
  IF INSERTING THEN
    SELECT COUNT(*) INTO gl_app_rows FROM APP."ORDER" gl_app
      WHERE gl_app."SELECT" = :NEW."SELECT" AND gl_app."USER" = :NEW."USER" AND ROWNUM = 1;
    SELECT COUNT(*) INTO gl_staged_rows FROM APP_H.ORDER_LK gl_staged
      WHERE gl_staged."SELECT" = :NEW."SELECT" AND gl_staged."USER" = :NEW."USER" AND ROWNUM = 1;
    IF gl_app_rows + gl_staged_rows > 0 THEN
      RAISE_APPLICATION_ERROR(-20002, 'INSERT through APP_H.ORDER_UV: the view already shows a row with this key (this method only adds rows)');
    END IF;
    INSERT INTO APP_H.ORDER_LOG (gl_seq, gl_op, gl_origin, "SELECT", "USER", "FROM", "LEVEL")
      VALUES (APP_H.ORDER_SEQ.NEXTVAL, 'I', 'V', :NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    IF gl_app_rows = 0 THEN
      DELETE FROM APP_H.ORDER_LK gl_staged
        WHERE (gl_staged."SELECT" = :NEW."SELECT" AND gl_staged."USER" = :NEW."USER");
      INSERT INTO APP_H.ORDER_LK ("SELECT", "USER", "FROM", "LEVEL")
        VALUES (:NEW."SELECT", :NEW."USER", :NEW."FROM", :NEW."LEVEL");
    END IF;
  ELSIF UPDATING THEN
    RAISE_APPLICATION_ERROR(-20001, 'UPDATE through APP_H.ORDER_UV is not captured (only INSERT)');
  ELSIF DELETING THEN
    RAISE_APPLICATION_ERROR(-20001, 'DELETE through APP_H.ORDER_UV is not captured (only INSERT)');
  END IF;
END;

-- case: UPDATABLE_INSERT drop_updatable_trigger
DROP TRIGGER APP_H.ORDER_UV
