-- case: plain names
SELECT COUNT(*) FROM APP.ORDERS

-- case: quoted names
SELECT COUNT(*) FROM "app"."Order Lines"
