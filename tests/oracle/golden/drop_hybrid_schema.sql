-- case: hybrid schema
DROP USER APP_H
