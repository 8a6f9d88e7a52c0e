"""The shop's data: a catalogue that matches the knowledge base, orders generated the same way every time,
and every check a load relies on (no service)."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from decimal import Decimal

import pytest

from labkit.core.corpus import DATA_DIR, DataError
from labkit.core.shop.data import (
    CODE_PATTERN,
    PRODUCTS_PATH,
    ShopData,
    read_products,
    validate_shop,
)
from labkit.core.shop.generate import FIRST_DAY, LAST_DAY, NEW_RETURNS_FROM, generate_shop, shop_data

KB_DOCUMENTS = DATA_DIR / "kb" / "documents.jsonl"


@pytest.fixture(scope="module")
def shop() -> ShopData:
    return shop_data()


def _kb() -> list[dict]:
    return [json.loads(line) for line in KB_DOCUMENTS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_catalogue_holds_exactly_the_knowledge_bases_article_codes():
    products = read_products()
    kb_codes = {code for doc in _kb() for code in doc["codes"]}
    assert {p.code for p in products} == kb_codes
    assert all(CODE_PATTERN.fullmatch(p.code) for p in products)


def test_a_product_the_knowledge_base_prices_has_that_price():
    """Document «Претензия продавцу» quotes a MacBook Pro 14 (M4, 2024), 9104-А, at 199 990 roubles."""
    claim = next(doc for doc in _kb() if "9104-А" in doc["codes"] and "199 990" in doc["text"])
    price = {p.code: p.price for p in read_products()}["9104-А"]
    assert f"{int(price):,}".replace(",", " ") in claim["text"]


def test_the_same_seed_gives_the_same_shop_and_another_seed_another(shop):
    assert shop_data() == shop
    other = generate_shop(shop.products, seed=7)
    assert other.orders != shop.orders and len(other.orders) == len(shop.orders)


def test_the_generated_shop_is_valid_and_a_few_thousand_rows(shop):
    validate_shop(shop)
    assert 2_000 <= shop.rows() <= 6_000
    assert [o.id for o in shop.orders] == list(range(1, len(shop.orders) + 1))
    days = [o.ordered_on for o in shop.orders]
    assert days == sorted(days) and FIRST_DAY <= days[0] and days[-1] <= LAST_DAY
    assert all(r.returned_on <= LAST_DAY for r in shop.returns)


def test_the_data_follows_the_knowledge_bases_rules(shop):
    orders = {o.id: o for o in shop.orders}
    items = {i.id: i for i in shop.items}
    products = {p.id: p for p in shop.products}
    for r in shop.returns:  # a good-quality return is approved within 14 days, 30 for online ones from 15.09.2026
        order = orders[items[r.order_item_id].order_id]
        if r.kind == "надлежащего качества":
            window = 30 if order.channel == "онлайн" and order.received_on >= NEW_RETURNS_FROM else 14
            assert (r.status == "одобрен") == ((r.returned_on - order.received_on).days <= window), r
    for o in shop.orders:
        if o.channel == "онлайн" and o.city == "Москва" and o.delivery == "курьер":
            bulky = any(products[i.product_id].bulky for i in shop.items if i.order_id == o.id)
            total = sum(i.price * i.quantity for i in shop.items if i.order_id == o.id)
            assert o.delivery_cost == (990 if bulky else 0 if total >= 5000 else 390), o
    kinds = Counter(r.kind for r in shop.returns)
    assert kinds["надлежащего качества"] and kinds["недостаток"]


def _broken(shop: ShopData, table: str, index: int, **changes) -> ShopData:
    rows = list(getattr(shop, table))
    rows[index] = rows[index]._replace(**changes)
    return shop._replace(**{table: tuple(rows)})


@pytest.mark.parametrize(
    ("table", "changes", "message"),
    [
        ("products", {"code": "7748-K"}, "products 4: code must be four digits"),  # a Latin K
        ("products", {"code": "3310-Т"}, "code 3310-Т is already product 2's"),
        ("products", {"price": Decimal("-1")}, "products 4: price must be roubles > 0"),
        ("products", {"price": Decimal("1.005")}, "at most 2 decimals"),
        ("products", {"name": "  "}, "products 4: name must be a non-empty text"),
        ("orders", {"status": "потерян"}, "orders 1: status must be one of"),
        ("orders", {"channel": "магазин"}, "orders 1: delivery 'в магазине' goes with channel 'магазин'"),
        ("orders", {"received_on": None}, "received_on is set exactly when the status is 'выполнен'"),
        ("orders", {"received_on": datetime.date(2024, 12, 31)}, "before ordered_on"),
        ("orders", {"id": 2}, "orders: duplicate id 2"),
        ("orders", {"id": 0}, "orders 0: id must be an integer in"),
        ("items", {"product_id": 999}, "order_items 1: product 999 does not exist"),
        ("items", {"order_id": 99_999}, "order_items 1: order 99999 does not exist"),
        ("items", {"quantity": 0}, "order_items 1: quantity must be an integer in [1, 1000]"),
        ("returns", {"returned_on": datetime.date(2025, 1, 1)}, "returns 1: returned_on 2025-01-01 is before"),
        ("returns", {"quantity": 5}, "units of order item"),
        ("returns", {"refund": Decimal("1000000")}, "returns 1: refund 1000000 exceeds"),
        ("returns", {"reason": "a\x00b"}, "without NUL"),
    ],
)
def test_bad_data_is_refused_naming_the_table_and_row(shop, table, changes, message):
    index = 3 if table == "products" else 0
    with pytest.raises(DataError) as refused:
        validate_shop(_broken(shop, table, index, **changes))
    assert message in str(refused.value)


def test_a_refused_return_refunds_nothing(shop):
    index = next(n for n, r in enumerate(shop.returns) if r.status == "одобрен")
    with pytest.raises(DataError, match="a refused return refunds nothing"):
        validate_shop(_broken(shop, "returns", index, status="отклонён"))


def test_a_return_of_an_order_never_received_is_refused(shop):
    cancelled = next(o for o in shop.orders if o.status == "отменён")
    item = next(i for i in shop.items if i.order_id == cancelled.id)
    with pytest.raises(DataError, match=f"its order {cancelled.id} was never received"):
        validate_shop(_broken(shop, "returns", 0, order_item_id=item.id))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": 1, "code": "1102-Ф", "name": "x", "brand": "b", "category": "c", "price": "дёшево", '
         '"warranty_months": 12, "technically_complex": true, "bulky": false}', "field 'price' must be a number"),
        ('{"id": 1, "code": "1102-Ф", "name": "x", "brand": "b", "category": "c", "price": 10, '
         '"warranty_months": 12, "technically_complex": "да", "bulky": false}', "field 'technically_complex' must be bool"),
        ('{"id": 1, "code": "1102-Ф", "name": "x", "brand": "b", "category": "c", "price": 10, '
         '"technically_complex": true, "bulky": false}', "missing field 'warranty_months'"),
        ('{"id": 1, "code": "1102", "name": "x", "brand": "b", "category": "c", "price": 10, '
         '"warranty_months": 12, "technically_complex": true, "bulky": false}', "products 1: code must be"),
    ],
)
def test_a_bad_catalogue_line_is_refused_naming_the_file_and_line(tmp_path, line, message):
    path = tmp_path / "products.jsonl"
    path.write_text("\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DataError) as refused:
        read_products(path)
    assert message in str(refused.value) and str(path) in str(refused.value)


def test_the_catalogue_file_is_the_one_the_shop_uses():
    assert PRODUCTS_PATH.is_file() and shop_data().products == read_products()
