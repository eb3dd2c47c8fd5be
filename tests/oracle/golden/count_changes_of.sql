-- case: changelogs
SELECT :n0 AS n, COUNT(*) AS pending FROM APP_H.ORDERS_LOG
UNION ALL
SELECT :n1 AS n, COUNT(*) AS pending FROM APP_H.ITEMS_LOG
