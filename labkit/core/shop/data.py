"""The shop's data as values: products, orders, order items, returns, and every check a load needs (19_sql_agent).

«ТехноМир» sells the products its knowledge base describes (``labkit/data/kb``): each product
carries the article code the documents cite (``7748-К``). The catalogue is a data file
(``labkit/data/shop/products.jsonl``); orders, their items and returns are generated from it
(``labkit.core.shop.generate``). ``validate_shop`` checks a whole ``ShopData`` before the database
is touched, so a load never starts on half a shop: the first problem is a ``DataError`` naming the
table and the row.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

from labkit.core.corpus import DATA_DIR, MAX_ID, DataError, read_records

__all__ = ["PRODUCTS_PATH", "CODE_PATTERN", "CHANNELS", "DELIVERIES", "PAYMENTS", "ORDER_STATUSES", "RETURN_KINDS",
           "RETURN_STATUSES", "Product", "Order", "OrderItem", "Return", "ShopData", "read_products", "validate_shop"]

PRODUCTS_PATH = DATA_DIR / "shop" / "products.jsonl"
CODE_PATTERN = re.compile(r"[0-9]{4}-[А-ЯЁ]")  # an article code: four digits, a hyphen, a capital Cyrillic letter
# The values of the shop's categorical columns (the database checks them too, labkit.store.shop.schema).
CHANNELS = ("онлайн", "магазин")
DELIVERIES = ("курьер", "пункт выдачи", "самовывоз", "в магазине")
PAYMENTS = ("карта", "СБП", "наличные", "рассрочка")
ORDER_STATUSES = ("выполнен", "отменён", "в доставке")
RETURN_KINDS = ("надлежащего качества", "недостаток")
RETURN_STATUSES = ("одобрен", "отклонён")


class Product(NamedTuple):
    """One product of the catalogue."""

    id: int
    code: str  # the article code, as in the knowledge base
    name: str
    brand: str
    category: str
    price: Decimal  # the current price, roubles
    warranty_months: int
    technically_complex: bool  # on the government's list of technically complex goods (ТСТ)
    bulky: bool  # large household appliance (КБТ): delivered to the entrance for a fee


class Order(NamedTuple):
    """One order: who, when, where, how it was delivered and paid, and how it ended."""

    id: int
    customer_id: int
    ordered_on: datetime.date
    channel: str  # one of CHANNELS
    city: str
    delivery: str  # one of DELIVERIES
    delivery_cost: Decimal
    payment: str  # one of PAYMENTS
    status: str  # one of ORDER_STATUSES
    received_on: datetime.date | None  # None unless the order was received (status 'выполнен')


class OrderItem(NamedTuple):
    """One line of an order: a product, how many, at what price per unit."""

    id: int
    order_id: int
    product_id: int
    quantity: int
    price: Decimal  # roubles per unit as sold (discounts included)


class Return(NamedTuple):
    """A return of (part of) an order line, and what the shop decided."""

    id: int
    order_item_id: int
    returned_on: datetime.date
    quantity: int
    kind: str  # one of RETURN_KINDS
    reason: str
    status: str  # one of RETURN_STATUSES
    refund: Decimal  # roubles paid back (0 when refused)


class ShopData(NamedTuple):
    """The whole shop, table by table, in the order the tables reference each other."""

    products: tuple[Product, ...]
    orders: tuple[Order, ...]
    items: tuple[OrderItem, ...]
    returns: tuple[Return, ...]

    def rows(self) -> int:
        """Rows in all four tables."""
        return sum(len(table) for table in self)


def _value(record: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in record:
        raise DataError(f"{where}: missing field {name!r}")
    value = record[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataError(f"{where}: field {name!r} must be {expected}, got {value!r}")
    return value


def read_products(path: str | Path = PRODUCTS_PATH) -> tuple[Product, ...]:
    """The catalogue file, sorted by id; a bad line is a DataError naming file:line. Taught in 19_sql_agent."""
    path = Path(path)
    products = []
    for number, record in read_records(path):
        where = f"{path}:{number}"
        price = _value(record, "price", (int, float, str), where)
        try:
            price = Decimal(str(price))
        except ArithmeticError:
            raise DataError(f"{where}: field 'price' must be a number of roubles, got {record['price']!r}") from None
        products.append(Product(
            id=_value(record, "id", int, where), code=_value(record, "code", str, where),
            name=_value(record, "name", str, where), brand=_value(record, "brand", str, where),
            category=_value(record, "category", str, where), price=price,
            warranty_months=_value(record, "warranty_months", int, where),
            technically_complex=_value(record, "technically_complex", bool, where),
            bulky=_value(record, "bulky", bool, where)))
    if not products:
        raise DataError(f"{path}: no products in the file")
    try:
        _check_products(products)
    except DataError as err:
        raise DataError(f"{path}: {err}") from None
    return tuple(sorted(products, key=lambda p: p.id))


def _ids(rows: Sequence[Any], table: str) -> set[int]:
    """The ids of `rows`, each in [1, MAX_ID] and unique."""
    for row in rows:
        if not isinstance(row.id, int) or not 1 <= row.id <= MAX_ID:
            raise DataError(f"{table} {row.id}: id must be an integer in [1, {MAX_ID}]")
    counts = Counter(row.id for row in rows)
    repeated = sorted(i for i, n in counts.items() if n > 1)
    if repeated:
        raise DataError(f"{table}: duplicate id {repeated[0]}")
    return set(counts)


def _text(row: Any, table: str, *names: str) -> None:
    for name in names:
        value = getattr(row, name)
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            raise DataError(f"{table} {row.id}: {name} must be a non-empty text without NUL, got {value!r}")


def _one_of(row: Any, table: str, name: str, allowed: Sequence[str]) -> None:
    if getattr(row, name) not in allowed:
        raise DataError(f"{table} {row.id}: {name} must be one of {', '.join(allowed)}, "
                        f"got {getattr(row, name)!r}")


def _money(row: Any, table: str, name: str, positive: bool) -> None:
    value = getattr(row, name)
    if not isinstance(value, Decimal) or not value.is_finite() or value < 0 or (positive and value == 0) \
            or value != value.quantize(Decimal("0.01")) or value >= 10**8:
        bound = "> 0" if positive else ">= 0"
        raise DataError(f"{table} {row.id}: {name} must be roubles {bound} with at most 2 decimals "
                        f"and below 100 000 000, got {value!r}")


def _count(row: Any, table: str, name: str, low: int, high: int) -> None:
    value = getattr(row, name)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise DataError(f"{table} {row.id}: {name} must be an integer in [{low}, {high}], got {value!r}")


def _check_products(products: Sequence[Product]) -> None:
    _ids(products, "products")
    codes: dict[str, int] = {}
    for p in products:
        _text(p, "products", "code", "name", "brand", "category")
        if not CODE_PATTERN.fullmatch(p.code):
            raise DataError(f"products {p.id}: code must be four digits, a hyphen and a capital Cyrillic letter "
                            f"(7748-К), got {p.code!r}")
        if p.code in codes:
            raise DataError(f"products {p.id}: code {p.code} is already product {codes[p.code]}'s")
        codes[p.code] = p.id
        _money(p, "products", "price", positive=True)
        _count(p, "products", "warranty_months", 0, 120)
        for flag in ("technically_complex", "bulky"):
            if not isinstance(getattr(p, flag), bool):
                raise DataError(f"products {p.id}: {flag} must be true or false, got {getattr(p, flag)!r}")


def _date(row: Any, table: str, name: str, optional: bool = False) -> None:
    value = getattr(row, name)
    if value is None and optional:
        return
    if not isinstance(value, datetime.date) or isinstance(value, datetime.datetime):
        raise DataError(f"{table} {row.id}: {name} must be a date, got {value!r}")


def validate_shop(data: ShopData) -> None:
    """Check the whole shop before a load: ids, codes, values, references, dates and quantities. Taught in 19_sql_agent.

    The first problem is a ``DataError`` naming the table and the row id («returns 7: returned_on
    2025-03-01 is before its order's date 2025-03-04»); nothing is returned on success.
    """
    if not data.products:
        raise DataError("products: the shop has no products")
    _check_products(data.products)
    products = {p.id: p for p in data.products}
    order_ids = _ids(data.orders, "orders")
    orders = {o.id: o for o in data.orders}
    for o in data.orders:
        _count(o, "orders", "customer_id", 1, MAX_ID)
        _date(o, "orders", "ordered_on")
        _date(o, "orders", "received_on", optional=True)
        _text(o, "orders", "city")
        _one_of(o, "orders", "channel", CHANNELS)
        _one_of(o, "orders", "delivery", DELIVERIES)
        _one_of(o, "orders", "payment", PAYMENTS)
        _one_of(o, "orders", "status", ORDER_STATUSES)
        _money(o, "orders", "delivery_cost", positive=False)
        if (o.channel == "магазин") != (o.delivery == "в магазине"):
            raise DataError(f"orders {o.id}: delivery 'в магазине' goes with channel 'магазин' and only with it, "
                            f"got channel {o.channel!r} and delivery {o.delivery!r}")
        if (o.status == "выполнен") != (o.received_on is not None):
            raise DataError(f"orders {o.id}: received_on is set exactly when the status is 'выполнен', "
                            f"got status {o.status!r} and received_on {o.received_on}")
        if o.received_on is not None and o.received_on < o.ordered_on:
            raise DataError(f"orders {o.id}: received_on {o.received_on} is before ordered_on {o.ordered_on}")
    _ids(data.items, "order_items")
    items = {i.id: i for i in data.items}
    for i in data.items:
        if i.order_id not in order_ids:
            raise DataError(f"order_items {i.id}: order {i.order_id} does not exist")
        if i.product_id not in products:
            raise DataError(f"order_items {i.id}: product {i.product_id} does not exist")
        _count(i, "order_items", "quantity", 1, 1000)
        _money(i, "order_items", "price", positive=True)
    returned: Counter[int] = Counter()
    _ids(data.returns, "returns")
    for r in data.returns:
        if r.order_item_id not in items:
            raise DataError(f"returns {r.id}: order item {r.order_item_id} does not exist")
        item = items[r.order_item_id]
        order = orders[item.order_id]
        _date(r, "returns", "returned_on")
        _count(r, "returns", "quantity", 1, 1000)
        _one_of(r, "returns", "kind", RETURN_KINDS)
        _one_of(r, "returns", "status", RETURN_STATUSES)
        _text(r, "returns", "reason")
        _money(r, "returns", "refund", positive=False)
        if order.received_on is None:
            raise DataError(f"returns {r.id}: its order {order.id} was never received (status {order.status!r})")
        if r.returned_on < order.received_on:
            raise DataError(f"returns {r.id}: returned_on {r.returned_on} is before its order {order.id} was "
                            f"received on {order.received_on}")
        returned[item.id] += r.quantity
        if returned[item.id] > item.quantity:
            raise DataError(f"returns {r.id}: {returned[item.id]} units of order item {item.id} returned, "
                            f"but {item.quantity} were sold")
        if r.refund > item.price * r.quantity:
            raise DataError(f"returns {r.id}: refund {r.refund} exceeds what {r.quantity} units cost "
                            f"({item.price * r.quantity})")
        if r.status == "отклонён" and r.refund != 0:
            raise DataError(f"returns {r.id}: a refused return refunds nothing, got refund {r.refund}")
