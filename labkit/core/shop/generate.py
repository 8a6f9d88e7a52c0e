"""Orders, order items and returns of «ТехноМир», generated from the catalogue with a fixed seed (19_sql_agent).

The same seed gives the same shop on every machine and every Python: only ``Random.random()``
is used, the one generator Python promises to keep (``random`` module docs, "Notes on
Reproducibility"); choices, weights and ranges are derived from it here. The rules follow
the knowledge base (``labkit/data/kb``): delivery prices, the return windows (14 days, 30 days for
online purchases received from 15.09.2026), instalment limits (0-0-6 until 30.06.2026, then 0-0-12),
15 days for a technically complex product with a defect.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from decimal import Decimal
from typing import TypeVar

from labkit.core.shop.data import Order, OrderItem, Product, Return, ShopData, read_products

__all__ = ["SEED", "ORDERS", "CUSTOMERS", "FIRST_DAY", "LAST_DAY", "generate_shop", "shop_data"]

SEED = 2026
ORDERS = 1600  # with their items and returns about 4 000 rows: a few seconds to load, enough to aggregate
CUSTOMERS = 700
FIRST_DAY = datetime.date(2025, 1, 1)
LAST_DAY = datetime.date(2026, 10, 31)  # the data ends here: later orders are still on their way
NEW_RETURNS_FROM = datetime.date(2026, 9, 15)  # «Порядок возврата электроники» 4.0: 30 days online
NEW_INSTALMENTS_FROM = datetime.date(2026, 7, 1)  # «Рассрочка 0-0-12»
PRICE_CHANGE = datetime.date(2026, 1, 1)  # the catalogue's prices hold from here; 2025 prices were lower
BLACK_FRIDAY = (datetime.date(2025, 11, 24), datetime.date(2025, 11, 30))  # 15 % off everything

STORE_CITIES = {"Москва": 6, "Санкт-Петербург": 3, "Казань": 1, "Екатеринбург": 1, "Новосибирск": 1}
ONLINE_CITIES = {"Москва": 38, "Санкт-Петербург": 18, "Казань": 7, "Екатеринбург": 7, "Новосибирск": 6,
                 "Нижний Новгород": 6, "Самара": 5, "Краснодар": 5, "Воронеж": 4, "Пермь": 4}
# How often each product is bought, by code (brackets and earphones often, laptops rarely).
POPULARITY = {"7748-К": 9, "7784-К": 7, "7748-М": 4, "2203-Н": 10, "1102-Ф": 8, "3301-Т": 5, "3310-Т": 6,
              "3311-Т": 4, "4405-П": 5, "6607-С": 4, "5512-К": 3, "5521-К": 3, "9002-А": 2, "9003-А": 2,
              "9104-А": 2, "9102-А": 1}
COMPANIONS = {"телевизоры": ("7748-К", "7784-К", "5512-К")}  # what a second line of a TV order often is
QUALITY_REASONS = ("не подошёл по размеру", "не подошёл по цвету", "передумал", "не понравился",
                   "нашёл дешевле")
DEFECT_REASONS = {
    "телевизоры": ("битые пиксели", "не включается", "полосы на экране"),
    "ноутбуки": ("не заряжается", "не работает порт USB-C", "не включается"),
    "смартфоны": ("не заряжается", "щелчки в динамике", "не включается"),
    "пылесосы": ("не заряжается", "не видит базу"),
    "стиральные машины": ("не сливает воду", "шумит при отжиме"),
    "наушники": ("не работает один наушник", "не сопрягается с телефоном"),
}
OTHER_DEFECTS = ("сломано крепление", "не хватает деталей")

T = TypeVar("T")


class _Draw:
    """Random choices derived from ``Random.random()`` alone (reproducible across Python versions)."""

    def __init__(self, seed: int) -> None:
        import random

        self._rng = random.Random(seed)

    def uniform(self) -> float:
        return self._rng.random()

    def chance(self, p: float) -> bool:
        return self._rng.random() < p

    def between(self, low: int, high: int) -> int:
        """An integer in [low, high], each equally likely."""
        return low + min(int(self._rng.random() * (high - low + 1)), high - low)

    def weighted(self, options: Sequence[tuple[T, float]]) -> T:
        total = sum(weight for _, weight in options)
        point = self._rng.random() * total
        for value, weight in options:
            point -= weight
            if point < 0:
                return value
        return options[-1][0]


def _price_on(product: Product, day: datetime.date) -> Decimal:
    """What one unit cost on `day`: the catalogue price from 2026, about 5 % less in 2025, 15 % off on Black Friday."""
    price = product.price
    if day < PRICE_CHANGE:
        step = Decimal(1000) if price >= 10_000 else Decimal(100)
        price -= step * max(1, round(price * Decimal("0.05") / step))
    if BLACK_FRIDAY[0] <= day <= BLACK_FRIDAY[1]:
        price = (price * Decimal("0.85") / 10).quantize(Decimal(1)) * 10
    return price


def _day_weight(day: datetime.date) -> float:
    if BLACK_FRIDAY[0] <= day <= BLACK_FRIDAY[1]:
        return 4.0
    return 1.6 if day.month in (11, 12) else 1.0


def _delivery(draw: _Draw, city: str, bulky: bool, total: Decimal) -> tuple[str, Decimal]:
    """How an online order reaches the buyer and what delivery costs («Доставка курьером», «Самовывоз», КБТ)."""
    if bulky:  # КБТ goes by courier to the entrance: 990 ₽ in Moscow and St Petersburg, 1 490 ₽ elsewhere
        return "курьер", Decimal(990 if city in ("Москва", "Санкт-Петербург") else 1490)
    options = [("курьер", 5.0), ("пункт выдачи", 3.0)] + ([("самовывоз", 2.0)] if city in STORE_CITIES else [])
    way = draw.weighted(options)
    if way == "самовывоз":
        return way, Decimal(0)
    if way == "пункт выдачи":
        return way, Decimal(0 if total >= 1000 else 99)
    if city == "Москва":
        return way, Decimal(0 if total >= 5000 else 390)
    return way, Decimal(490)


def _payment(draw: _Draw, day: datetime.date, total: Decimal, channel: str) -> str:
    low, high = (10_000, 300_000) if day >= NEW_INSTALMENTS_FROM else (5_000, 150_000)
    options: list[tuple[str, float]] = [("карта", 6.0), ("СБП", 2.5 if channel == "онлайн" else 1.5)]
    if total <= 150_000:  # cash (or card on delivery) up to 150 000 ₽
        options.append(("наличные", 2.0 if channel == "магазин" else 1.0))
    if low <= total <= high:
        options.append(("рассрочка", 1.5))
    return draw.weighted(options)


def _received(draw: _Draw, order_day: datetime.date, city: str, delivery: str) -> datetime.date:
    if delivery == "в магазине":
        return order_day
    if delivery == "самовывоз":
        days = draw.between(0, 1)
    elif delivery == "пункт выдачи":
        days = draw.between(1, 5)
    else:
        days = draw.between(1, 2) if city in ("Москва", "Санкт-Петербург") else draw.between(2, 7)
    return order_day + datetime.timedelta(days=days)


def _return(draw: _Draw, item: OrderItem, product: Product, order: Order) -> tuple[int, str, str, str, int] | None:
    """(days after receipt, kind, reason, status, quantity) of a return of `item`, or None when it would fall after the data."""
    assert order.received_on is not None
    quantity = item.quantity if item.quantity > 1 and draw.chance(0.3) else 1
    if draw.chance(0.4):  # a defect: ТСТ within 15 days, later only a substantial defect (about half)
        reasons = DEFECT_REASONS.get(product.category, OTHER_DEFECTS)
        reason = reasons[draw.between(0, len(reasons) - 1)]
        if product.technically_complex:
            days = draw.between(1, 15) if draw.chance(0.6) else draw.between(16, 200)
            status = "одобрен" if days <= 15 or draw.chance(0.5) else "отклонён"
        else:
            days = draw.between(1, 300)
            status = "одобрен" if draw.chance(0.85) else "отклонён"
        kind = "недостаток"
    else:  # good quality: 14 days, 30 for an online order received from 15.09.2026; a late one is refused
        window = 30 if order.channel == "онлайн" and order.received_on >= NEW_RETURNS_FROM else 14
        days = draw.between(window + 1, window + 10) if draw.chance(0.1) else draw.between(0, window)
        status = "одобрен" if days <= window else "отклонён"
        kind, reason = "надлежащего качества", QUALITY_REASONS[draw.between(0, len(QUALITY_REASONS) - 1)]
    if order.received_on + datetime.timedelta(days=days) > LAST_DAY:
        return None
    return days, kind, reason, status, quantity


def generate_shop(products: Sequence[Product], seed: int = SEED, orders: int = ORDERS) -> ShopData:
    """Orders, their items and returns for `products`, the same for the same seed. Taught in 19_sql_agent.

    Orders are numbered in date order from 1, items in order of their orders, returns by date.
    """
    draw = _Draw(seed)
    by_code = {p.code: p for p in products}
    popular = [(p, float(POPULARITY.get(p.code, 2))) for p in products]
    days = [FIRST_DAY + datetime.timedelta(days=n) for n in range((LAST_DAY - FIRST_DAY).days + 1)]
    day_options = [(day, _day_weight(day)) for day in days]
    drafts = []
    for _ in range(orders):
        day = draw.weighted(day_options)
        customer = 1 + min(int(CUSTOMERS * draw.uniform() ** 1.6), CUSTOMERS - 1)  # some buy again and again
        chosen: list[Product] = [draw.weighted(popular)]
        for _ in range(draw.weighted([(0, 68.0), (1, 24.0), (2, 8.0)])):
            companions = [by_code[c] for c in COMPANIONS.get(chosen[0].category, ()) if c in by_code]
            options = [(p, 3.0) for p in companions] + popular
            extra = draw.weighted([(p, w) for p, w in options if p not in chosen] or popular)
            if extra not in chosen:
                chosen.append(extra)
        lines = [(p, 2 if p.price < 5000 and draw.chance(0.2) else 1) for p in chosen]
        drafts.append((day, customer, lines))
    drafts.sort(key=lambda d: d[0])  # ids follow the calendar

    out_orders: list[Order] = []
    out_items: list[OrderItem] = []
    for number, (day, customer, lines) in enumerate(drafts, start=1):
        channel = "онлайн" if draw.chance(0.65) else "магазин"
        cities = ONLINE_CITIES if channel == "онлайн" else STORE_CITIES
        city = draw.weighted([(name, float(weight)) for name, weight in cities.items()])
        priced = [(p, quantity, _price_on(p, day)) for p, quantity in lines]
        total = sum((price * quantity for _, quantity, price in priced), Decimal(0))
        if channel == "магазин":
            delivery, cost = "в магазине", Decimal(0)
        else:
            delivery, cost = _delivery(draw, city, any(p.bulky for p, _, _ in priced), total)
        payment = _payment(draw, day, total, channel)
        received: datetime.date | None = _received(draw, day, city, delivery)
        status = "выполнен"
        if channel == "онлайн" and draw.chance(0.06):
            status, received = "отменён", None
        elif received is not None and received > LAST_DAY:
            status, received = "в доставке", None
        out_orders.append(Order(number, customer, day, channel, city, delivery, cost, payment, status, received))
        for p, quantity, price in priced:
            out_items.append(OrderItem(len(out_items) + 1, number, p.id, quantity, price))

    orders_by_id = {o.id: o for o in out_orders}
    products_by_id = {p.id: p for p in products}
    drafted_returns = []
    for item in out_items:
        order = orders_by_id[item.order_id]
        if order.received_on is None or not draw.chance(0.06):
            continue
        found = _return(draw, item, products_by_id[item.product_id], order)
        if found is None:
            continue
        days_after, kind, reason, status, quantity = found
        refund = item.price * quantity if status == "одобрен" else Decimal(0)
        returned_on = order.received_on + datetime.timedelta(days=days_after)
        drafted_returns.append((returned_on, item.id, quantity, kind, reason, status, refund))
    drafted_returns.sort(key=lambda r: (r[0], r[1]))
    out_returns = tuple(Return(n, item_id, day, quantity, kind, reason, status, refund)
                        for n, (day, item_id, quantity, kind, reason, status, refund) in enumerate(drafted_returns, 1))
    return ShopData(tuple(products), tuple(out_orders), tuple(out_items), out_returns)


def shop_data(seed: int = SEED, orders: int = ORDERS) -> ShopData:
    """The course's shop: the catalogue file and the orders generated from it. Taught in 19_sql_agent."""
    return generate_shop(read_products(), seed=seed, orders=orders)
