"""Create (or change) the demo's sample SQLite source database.

python scripts/sample_source.py create PATH   # a fresh sh.products-like table
python scripts/sample_source.py change PATH   # some inserts, updates and deletes
python scripts/sample_source.py more PATH     # a key change and a multi-row update
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

PRODUCTS = [
    (1, "Espresso cup", "Kitchen", "4.50", "2024-01-15 09:30:00"),
    (2, "Tea pot", "Kitchen", "24.90", "2024-02-01 14:00:00"),
    (3, "Desk lamp", "Office", "39.00", "2024-02-20 11:15:00"),
    (4, "Notebook A5", "Office", "3.20", "2024-03-05 08:45:00"),
    (5, "Umbrella", "Outdoor", "12.00", "2024-03-10 17:20:00"),
]


def create(path: Path) -> None:
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE products (prod_id INTEGER PRIMARY KEY, prod_name TEXT NOT NULL, "
            "category TEXT, list_price NUMERIC(10,2), created_at TIMESTAMP)"
        )
        db.executemany("INSERT INTO products VALUES (?, ?, ?, ?, ?)", PRODUCTS)
    print(f"sample: created {path} with {len(PRODUCTS)} products")


def change(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE products SET list_price = 27.50 WHERE prod_id = 2")
        db.execute("DELETE FROM products WHERE prod_id = 4")
        db.execute(
            "INSERT INTO products VALUES "
            "(6, 'Bicycle bell', 'Outdoor', 8.99, '2024-04-01 10:00:00')"
        )
        db.execute("UPDATE products SET category = 'Home office' WHERE category = 'Office'")
    print("sample: updated prod 2, deleted prod 4, inserted prod 6, renamed category Office")


def more(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE products SET prod_id = 7 WHERE prod_id = 5")
        db.execute("UPDATE products SET list_price = list_price * 1.1 WHERE category = 'Kitchen'")
    print("sample: renumbered prod 5 to 7, raised Kitchen prices by 10%")


if __name__ == "__main__":
    action, target = sys.argv[1], Path(sys.argv[2])
    {"create": create, "change": change, "more": more}[action](target)
