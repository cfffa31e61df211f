#!/usr/bin/env bash
# Rebuilds repo.bundle: a small Python inventory service with a known history, committed with
# fixed authors and dates so the bundle is reproducible. Then mine tasks with
#   svc workloads mine-git <clone> --out workloads/code-localization-mini/tasks.jsonl
# (the test suite checks that the committed tasks.jsonl equals what mining the bundle gives).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export GIT_AUTHOR_NAME="svc fixture" GIT_AUTHOR_EMAIL="fixture@svc.invalid"
export GIT_COMMITTER_NAME="svc fixture" GIT_COMMITTER_EMAIL="fixture@svc.invalid"
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2026-01-01T00:$(printf %02d $n):00Z" GIT_COMMITTER_DATE="2026-01-01T00:$(printf %02d $n):00Z"
  git add -A
  git commit --quiet -m "$1"
}
git init --quiet -b main
mkdir -p inventory tests
cat > inventory/__init__.py <<'PY'
"""A small inventory service: items, stock levels, pricing and reports."""
PY
cat > inventory/models.py <<'PY'
from dataclasses import dataclass


@dataclass
class Item:
    sku: str
    name: str
    unit_price_cents: int
    quantity: int = 0
PY
cat > inventory/store.py <<'PY'
from .models import Item


class Store:
    def __init__(self):
        self.items = {}

    def add(self, item: Item):
        self.items[item.sku] = item

    def get(self, sku):
        return self.items[sku]

    def restock(self, sku, amount):
        self.items[sku].quantity += amount
PY
cat > inventory/pricing.py <<'PY'
def total_value_cents(items):
    return sum(item.unit_price_cents * item.quantity for item in items)


def apply_discount(price_cents, percent):
    return price_cents - price_cents * percent // 100
PY
cat > inventory/report.py <<'PY'
def stock_report(store):
    lines = []
    for item in store.items.values():
        lines.append(f"{item.sku} {item.name} {item.quantity}")
    return "\n".join(lines)
PY
cat > inventory/csv_import.py <<'PY'
import csv

from .models import Item


def load_items(path):
    with open(path) as handle:
        for row in csv.DictReader(handle):
            yield Item(row["sku"], row["name"], int(row["price"]), int(row["quantity"]))
PY
cat > tests/test_store.py <<'PY'
from inventory.models import Item
from inventory.store import Store


def test_restock():
    store = Store()
    store.add(Item("a1", "bolt", 10))
    store.restock("a1", 5)
    assert store.get("a1").quantity == 5
PY
cat > README.md <<'PY'
# inventory

Items, stock levels, pricing and reports for a small warehouse.
PY
commit "Initial inventory service"

python3 - <<'PY'
import re
p = "inventory/store.py"
s = open(p).read()
s = s.replace("    def restock(self, sku, amount):\n        self.items[sku].quantity += amount\n",
"    def restock(self, sku, amount):\n        if amount <= 0:\n            raise ValueError(\"restock amount must be positive\")\n        self.items[sku].quantity += amount\n")
open(p, "w").write(s)
PY
commit "Reject non-positive restock amounts in the store"

python3 - <<'PY'
p = "inventory/pricing.py"
s = open(p).read()
s = s.replace("def apply_discount(price_cents, percent):\n    return price_cents - price_cents * percent // 100\n",
"def apply_discount(price_cents, percent):\n    if not 0 <= percent <= 100:\n        raise ValueError(\"discount percent must be between 0 and 100\")\n    return price_cents - price_cents * percent // 100\n")
open(p, "w").write(s)
PY
commit "Validate the discount percentage range in pricing"

python3 - <<'PY'
p = "inventory/report.py"
s = open(p).read()
s = s.replace("    for item in store.items.values():", "    for item in sorted(store.items.values(), key=lambda i: i.sku):")
open(p, "w").write(s)
PY
commit "Sort the stock report by SKU"

python3 - <<'PY'
p = "tests/test_store.py"
s = open(p).read() + "\n\ndef test_get_missing():\n    assert Store().items == {}\n"
open(p, "w").write(s)
PY
commit "Add a store test for an empty inventory"

python3 - <<'PY'
p = "inventory/csv_import.py"
s = open(p).read()
s = s.replace("    with open(path) as handle:", "    with open(path, newline=\"\", encoding=\"utf-8\") as handle:")
open(p, "w").write(s)
PY
commit "Open CSV imports as UTF-8 with universal newlines"

python3 - <<'PY'
p = "inventory/models.py"
s = open(p).read() + "\n    def value_cents(self):\n        return self.unit_price_cents * self.quantity\n"
open(p, "w").write(s)
p = "inventory/pricing.py"
s = open(p).read().replace("    return sum(item.unit_price_cents * item.quantity for item in items)", "    return sum(item.value_cents() for item in items)")
open(p, "w").write(s)
PY
commit "Compute item value on the model and use it for the total stock value"

python3 - <<'PY'
p = "inventory/report.py"
s = open(p).read().replace('        lines.append(f"{item.sku} {item.name} {item.quantity}")', '        flag = " LOW" if item.quantity < 5 else ""\n        lines.append(f"{item.sku} {item.name} {item.quantity}{flag}")')
open(p, "w").write(s)
PY
commit "Flag low stock items in the stock report"

python3 - <<'PY'
p = "inventory/store.py"
s = open(p).read().replace("    def get(self, sku):\n        return self.items[sku]\n", "    def get(self, sku):\n        if sku not in self.items:\n            raise KeyError(f\"unknown sku {sku}\")\n        return self.items[sku]\n\n    def remove(self, sku):\n        del self.items[sku]\n")
open(p, "w").write(s)
PY
commit "Add removing items from the store and a clear error for unknown SKUs"

python3 - <<'PY'
p = "inventory/csv_import.py"
s = open(p).read().replace('int(row["price"])', 'int(round(float(row["price"]) * 100))')
open(p, "w").write(s)
PY
commit "Parse CSV prices given in whole currency units into cents"

git bundle create --quiet "$HERE/repo.bundle" HEAD main
echo "wrote $HERE/repo.bundle"
