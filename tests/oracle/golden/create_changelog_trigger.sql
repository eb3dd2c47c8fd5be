-- case: CHANGELOG
CREATE OR REPLACE TRIGGER APP_H.ORDERS_CT
FOR INSERT OR UPDATE OR DELETE ON APP.ORDERS
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:
  TYPE gl_key IS RECORD (ORDER_ID APP.ORDERS.ORDER_ID%TYPE, LINE_NO APP.ORDERS.LINE_NO%TYPE);
  TYPE gl_keys IS TABLE OF gl_key;
  gl_moved gl_keys := gl_keys();
  gl_old gl_key;
  gl_held PLS_INTEGER;
  TYPE gl_kinds IS TABLE OF CHAR(1);
  gl_kind gl_kinds := gl_kinds();
  TYPE gl_t1 IS TABLE OF APP_H.ORDERS_LOG.ORDER_ID%TYPE;
  gl_c1 gl_t1 := gl_t1();
  TYPE gl_t2 IS TABLE OF APP_H.ORDERS_LOG.LINE_NO%TYPE;
  gl_c2 gl_t2 := gl_t2();
  TYPE gl_t3 IS TABLE OF APP_H.ORDERS_LOG.AMOUNT%TYPE;
  gl_c3 gl_t3 := gl_t3();
  TYPE gl_t4 IS TABLE OF APP_H.ORDERS_LOG.ZONED_AT%TYPE;
  gl_c4 gl_t4 := gl_t4();
  TYPE gl_t5 IS TABLE OF APP_H.ORDERS_LOG.NOTES%TYPE;
  gl_c5 gl_t5 := gl_t5();
  TYPE gl_t6 IS TABLE OF APP_H.ORDERS_LOG."lower_case"%TYPE;
  gl_c6 gl_t6 := gl_t6();
  gl_count PLS_INTEGER := 0;

  PROCEDURE gl_empty IS
  BEGIN
    gl_count := 0;
    gl_kind := gl_kinds();
    gl_c1 := gl_t1();
    gl_c2 := gl_t2();
    gl_c3 := gl_t3();
    gl_c4 := gl_t4();
    gl_c5 := gl_t5();
    gl_c6 := gl_t6();
  END gl_empty;

  PROCEDURE gl_flush IS
  BEGIN
    FORALL gl_i IN 1 .. gl_count
      INSERT INTO APP_H.ORDERS_LOG (gl_seq, gl_op, gl_origin, ORDER_ID, LINE_NO, AMOUNT, ZONED_AT, NOTES, "lower_case")
        VALUES (APP_H.ORDERS_SEQ.NEXTVAL, gl_kind(gl_i), 'T', gl_c1(gl_i), gl_c2(gl_i), gl_c3(gl_i), gl_c4(gl_i), gl_c5(gl_i), gl_c6(gl_i));
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
      gl_c1(gl_count) := :NEW.ORDER_ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :NEW.LINE_NO;
      gl_c3.EXTEND;
      gl_c3(gl_count) := :NEW.AMOUNT;
      gl_c4.EXTEND;
      gl_c4(gl_count) := :NEW.ZONED_AT;
      gl_c5.EXTEND;
      gl_c5(gl_count) := :NEW.NOTES;
      gl_c6.EXTEND;
      gl_c6(gl_count) := :NEW."lower_case";
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    ELSIF UPDATING THEN
      IF NOT (((:NEW.ORDER_ID IS NULL AND :OLD.ORDER_ID IS NULL) OR (:NEW.ORDER_ID IS NOT NULL AND :OLD.ORDER_ID IS NOT NULL AND :NEW.ORDER_ID = :OLD.ORDER_ID))
          AND ((:NEW.LINE_NO IS NULL AND :OLD.LINE_NO IS NULL) OR (:NEW.LINE_NO IS NOT NULL AND :OLD.LINE_NO IS NOT NULL AND :NEW.LINE_NO = :OLD.LINE_NO))) THEN
        gl_moved.EXTEND;
        gl_moved(gl_moved.LAST).ORDER_ID := :OLD.ORDER_ID;
        gl_moved(gl_moved.LAST).LINE_NO := :OLD.LINE_NO;
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'I';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.ORDER_ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.LINE_NO;
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW.AMOUNT;
        gl_c4.EXTEND;
        gl_c4(gl_count) := :NEW.ZONED_AT;
        gl_c5.EXTEND;
        gl_c5(gl_count) := :NEW.NOTES;
        gl_c6.EXTEND;
        gl_c6(gl_count) := :NEW."lower_case";
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      ELSIF NOT (((:NEW.ORDER_ID IS NULL AND :OLD.ORDER_ID IS NULL) OR (:NEW.ORDER_ID IS NOT NULL AND :OLD.ORDER_ID IS NOT NULL AND :NEW.ORDER_ID = :OLD.ORDER_ID))
          AND ((:NEW.LINE_NO IS NULL AND :OLD.LINE_NO IS NULL) OR (:NEW.LINE_NO IS NOT NULL AND :OLD.LINE_NO IS NOT NULL AND :NEW.LINE_NO = :OLD.LINE_NO))
          AND ((:NEW.AMOUNT IS NULL AND :OLD.AMOUNT IS NULL) OR (:NEW.AMOUNT IS NOT NULL AND :OLD.AMOUNT IS NOT NULL AND :NEW.AMOUNT = :OLD.AMOUNT))
          AND ((:NEW.ZONED_AT IS NULL AND :OLD.ZONED_AT IS NULL) OR (:NEW.ZONED_AT IS NOT NULL AND :OLD.ZONED_AT IS NOT NULL AND :NEW.ZONED_AT = :OLD.ZONED_AT))
          AND ((:NEW.NOTES IS NULL AND :OLD.NOTES IS NULL) OR (:NEW.NOTES IS NOT NULL AND :OLD.NOTES IS NOT NULL AND DBMS_LOB.COMPARE(:NEW.NOTES, :OLD.NOTES) = 0))
          AND ((:NEW."lower_case" IS NULL AND :OLD."lower_case" IS NULL) OR (:NEW."lower_case" IS NOT NULL AND :OLD."lower_case" IS NOT NULL AND :NEW."lower_case" = :OLD."lower_case"))) THEN
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'U';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.ORDER_ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.LINE_NO;
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW.AMOUNT;
        gl_c4.EXTEND;
        gl_c4(gl_count) := :NEW.ZONED_AT;
        gl_c5.EXTEND;
        gl_c5(gl_count) := :NEW.NOTES;
        gl_c6.EXTEND;
        gl_c6(gl_count) := :NEW."lower_case";
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      END IF;
    ELSIF DELETING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'D';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :OLD.ORDER_ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :OLD.LINE_NO;
      gl_c3.EXTEND;
      gl_c4.EXTEND;
      gl_c5.EXTEND;
      gl_c6.EXTEND;
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
      SELECT COUNT(*) INTO gl_held FROM APP.ORDERS gl_app
        WHERE gl_app.ORDER_ID = gl_old.ORDER_ID AND gl_app.LINE_NO = gl_old.LINE_NO AND ROWNUM = 1;
      IF gl_held = 0 THEN
        INSERT INTO APP_H.ORDERS_LOG (gl_seq, gl_op, gl_origin, ORDER_ID, LINE_NO)
          VALUES (APP_H.ORDERS_SEQ.NEXTVAL, 'D', 'T', gl_old.ORDER_ID, gl_old.LINE_NO);
      END IF;
    END LOOP;
  END AFTER STATEMENT;
END;

-- case: CHANGELOG_INSERT
CREATE OR REPLACE TRIGGER APP_H.ORDERS_CT
FOR INSERT OR UPDATE OR DELETE ON APP.ORDERS
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:

  AFTER EACH ROW IS
  BEGIN
    IF INSERTING THEN
      INSERT INTO APP_H.ORDERS_LOG (gl_seq, gl_op, gl_origin, ORDER_ID, LINE_NO, AMOUNT, ZONED_AT, NOTES, "lower_case")
        VALUES (APP_H.ORDERS_SEQ.NEXTVAL, 'I', 'T', :NEW.ORDER_ID, :NEW.LINE_NO, :NEW.AMOUNT, :NEW.ZONED_AT, :NEW.NOTES, :NEW."lower_case");
    ELSIF UPDATING THEN
      IF NOT (((:NEW.ORDER_ID IS NULL AND :OLD.ORDER_ID IS NULL) OR (:NEW.ORDER_ID IS NOT NULL AND :OLD.ORDER_ID IS NOT NULL AND :NEW.ORDER_ID = :OLD.ORDER_ID))
          AND ((:NEW.LINE_NO IS NULL AND :OLD.LINE_NO IS NULL) OR (:NEW.LINE_NO IS NOT NULL AND :OLD.LINE_NO IS NOT NULL AND :NEW.LINE_NO = :OLD.LINE_NO))
          AND ((:NEW.AMOUNT IS NULL AND :OLD.AMOUNT IS NULL) OR (:NEW.AMOUNT IS NOT NULL AND :OLD.AMOUNT IS NOT NULL AND :NEW.AMOUNT = :OLD.AMOUNT))
          AND ((:NEW.ZONED_AT IS NULL AND :OLD.ZONED_AT IS NULL) OR (:NEW.ZONED_AT IS NOT NULL AND :OLD.ZONED_AT IS NOT NULL AND :NEW.ZONED_AT = :OLD.ZONED_AT))
          AND ((:NEW.NOTES IS NULL AND :OLD.NOTES IS NULL) OR (:NEW.NOTES IS NOT NULL AND :OLD.NOTES IS NOT NULL AND DBMS_LOB.COMPARE(:NEW.NOTES, :OLD.NOTES) = 0))
          AND ((:NEW."lower_case" IS NULL AND :OLD."lower_case" IS NULL) OR (:NEW."lower_case" IS NOT NULL AND :OLD."lower_case" IS NOT NULL AND :NEW."lower_case" = :OLD."lower_case"))) THEN
        INSERT INTO APP_H.ORDERS_LOG (gl_seq, gl_op, gl_origin, ORDER_ID, LINE_NO)
          VALUES (APP_H.ORDERS_SEQ.NEXTVAL, 'U', 'T', :OLD.ORDER_ID, :OLD.LINE_NO);
      END IF;
    ELSIF DELETING THEN
      INSERT INTO APP_H.ORDERS_LOG (gl_seq, gl_op, gl_origin, ORDER_ID, LINE_NO)
        VALUES (APP_H.ORDERS_SEQ.NEXTVAL, 'D', 'T', :OLD.ORDER_ID, :OLD.LINE_NO);
    END IF;
  END AFTER EACH ROW;
END;

-- case: UPDATABLE_CHANGELOG
CREATE OR REPLACE TRIGGER APP_H.ORDERS_CT
FOR INSERT OR UPDATE OR DELETE ON APP.ORDERS
COMPOUND TRIGGER
  -- gluon:00000000000000000000000000000000:
  TYPE gl_key IS RECORD (ORDER_ID APP.ORDERS.ORDER_ID%TYPE, LINE_NO APP.ORDERS.LINE_NO%TYPE);
  TYPE gl_keys IS TABLE OF gl_key;
  gl_moved gl_keys := gl_keys();
  gl_old gl_key;
  gl_held PLS_INTEGER;
  TYPE gl_kinds IS TABLE OF CHAR(1);
  gl_kind gl_kinds := gl_kinds();
  TYPE gl_t1 IS TABLE OF APP_H.ORDERS_LOG.ORDER_ID%TYPE;
  gl_c1 gl_t1 := gl_t1();
  TYPE gl_t2 IS TABLE OF APP_H.ORDERS_LOG.LINE_NO%TYPE;
  gl_c2 gl_t2 := gl_t2();
  TYPE gl_t3 IS TABLE OF APP_H.ORDERS_LOG.AMOUNT%TYPE;
  gl_c3 gl_t3 := gl_t3();
  TYPE gl_t4 IS TABLE OF APP_H.ORDERS_LOG.ZONED_AT%TYPE;
  gl_c4 gl_t4 := gl_t4();
  TYPE gl_t5 IS TABLE OF APP_H.ORDERS_LOG.NOTES%TYPE;
  gl_c5 gl_t5 := gl_t5();
  TYPE gl_t6 IS TABLE OF APP_H.ORDERS_LOG."lower_case"%TYPE;
  gl_c6 gl_t6 := gl_t6();
  gl_count PLS_INTEGER := 0;

  PROCEDURE gl_empty IS
  BEGIN
    gl_count := 0;
    gl_kind := gl_kinds();
    gl_c1 := gl_t1();
    gl_c2 := gl_t2();
    gl_c3 := gl_t3();
    gl_c4 := gl_t4();
    gl_c5 := gl_t5();
    gl_c6 := gl_t6();
  END gl_empty;

  PROCEDURE gl_flush IS
  BEGIN
    FORALL gl_i IN 1 .. gl_count
      INSERT INTO APP_H.ORDERS_LOG (gl_seq, gl_op, gl_origin, ORDER_ID, LINE_NO, AMOUNT, ZONED_AT, NOTES, "lower_case")
        VALUES (APP_H.ORDERS_SEQ.NEXTVAL, gl_kind(gl_i), 'T', gl_c1(gl_i), gl_c2(gl_i), gl_c3(gl_i), gl_c4(gl_i), gl_c5(gl_i), gl_c6(gl_i));
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
      gl_c1(gl_count) := :NEW.ORDER_ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :NEW.LINE_NO;
      gl_c3.EXTEND;
      gl_c3(gl_count) := :NEW.AMOUNT;
      gl_c4.EXTEND;
      gl_c4(gl_count) := :NEW.ZONED_AT;
      gl_c5.EXTEND;
      gl_c5(gl_count) := :NEW.NOTES;
      gl_c6.EXTEND;
      gl_c6(gl_count) := :NEW."lower_case";
      IF gl_count >= 1000 THEN
        gl_flush;
      END IF;
    ELSIF UPDATING THEN
      IF NOT (((:NEW.ORDER_ID IS NULL AND :OLD.ORDER_ID IS NULL) OR (:NEW.ORDER_ID IS NOT NULL AND :OLD.ORDER_ID IS NOT NULL AND :NEW.ORDER_ID = :OLD.ORDER_ID))
          AND ((:NEW.LINE_NO IS NULL AND :OLD.LINE_NO IS NULL) OR (:NEW.LINE_NO IS NOT NULL AND :OLD.LINE_NO IS NOT NULL AND :NEW.LINE_NO = :OLD.LINE_NO))) THEN
        gl_moved.EXTEND;
        gl_moved(gl_moved.LAST).ORDER_ID := :OLD.ORDER_ID;
        gl_moved(gl_moved.LAST).LINE_NO := :OLD.LINE_NO;
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'I';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.ORDER_ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.LINE_NO;
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW.AMOUNT;
        gl_c4.EXTEND;
        gl_c4(gl_count) := :NEW.ZONED_AT;
        gl_c5.EXTEND;
        gl_c5(gl_count) := :NEW.NOTES;
        gl_c6.EXTEND;
        gl_c6(gl_count) := :NEW."lower_case";
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      ELSIF NOT (((:NEW.ORDER_ID IS NULL AND :OLD.ORDER_ID IS NULL) OR (:NEW.ORDER_ID IS NOT NULL AND :OLD.ORDER_ID IS NOT NULL AND :NEW.ORDER_ID = :OLD.ORDER_ID))
          AND ((:NEW.LINE_NO IS NULL AND :OLD.LINE_NO IS NULL) OR (:NEW.LINE_NO IS NOT NULL AND :OLD.LINE_NO IS NOT NULL AND :NEW.LINE_NO = :OLD.LINE_NO))
          AND ((:NEW.AMOUNT IS NULL AND :OLD.AMOUNT IS NULL) OR (:NEW.AMOUNT IS NOT NULL AND :OLD.AMOUNT IS NOT NULL AND :NEW.AMOUNT = :OLD.AMOUNT))
          AND ((:NEW.ZONED_AT IS NULL AND :OLD.ZONED_AT IS NULL) OR (:NEW.ZONED_AT IS NOT NULL AND :OLD.ZONED_AT IS NOT NULL AND :NEW.ZONED_AT = :OLD.ZONED_AT))
          AND ((:NEW.NOTES IS NULL AND :OLD.NOTES IS NULL) OR (:NEW.NOTES IS NOT NULL AND :OLD.NOTES IS NOT NULL AND DBMS_LOB.COMPARE(:NEW.NOTES, :OLD.NOTES) = 0))
          AND ((:NEW."lower_case" IS NULL AND :OLD."lower_case" IS NULL) OR (:NEW."lower_case" IS NOT NULL AND :OLD."lower_case" IS NOT NULL AND :NEW."lower_case" = :OLD."lower_case"))) THEN
        gl_count := gl_count + 1;
        gl_kind.EXTEND;
        gl_kind(gl_count) := 'U';
        gl_c1.EXTEND;
        gl_c1(gl_count) := :NEW.ORDER_ID;
        gl_c2.EXTEND;
        gl_c2(gl_count) := :NEW.LINE_NO;
        gl_c3.EXTEND;
        gl_c3(gl_count) := :NEW.AMOUNT;
        gl_c4.EXTEND;
        gl_c4(gl_count) := :NEW.ZONED_AT;
        gl_c5.EXTEND;
        gl_c5(gl_count) := :NEW.NOTES;
        gl_c6.EXTEND;
        gl_c6(gl_count) := :NEW."lower_case";
        IF gl_count >= 1000 THEN
          gl_flush;
        END IF;
      END IF;
    ELSIF DELETING THEN
      gl_count := gl_count + 1;
      gl_kind.EXTEND;
      gl_kind(gl_count) := 'D';
      gl_c1.EXTEND;
      gl_c1(gl_count) := :OLD.ORDER_ID;
      gl_c2.EXTEND;
      gl_c2(gl_count) := :OLD.LINE_NO;
      gl_c3.EXTEND;
      gl_c4.EXTEND;
      gl_c5.EXTEND;
      gl_c6.EXTEND;
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
      SELECT COUNT(*) INTO gl_held FROM APP.ORDERS gl_app
        WHERE gl_app.ORDER_ID = gl_old.ORDER_ID AND gl_app.LINE_NO = gl_old.LINE_NO AND ROWNUM = 1;
      IF gl_held = 0 THEN
        INSERT INTO APP_H.ORDERS_LOG (gl_seq, gl_op, gl_origin, ORDER_ID, LINE_NO)
          VALUES (APP_H.ORDERS_SEQ.NEXTVAL, 'D', 'T', gl_old.ORDER_ID, gl_old.LINE_NO);
      END IF;
    END LOOP;
  END AFTER STATEMENT;
END;
