"""Inventory: products (SKUs) with stock levels and reorder points in warehouses, stock movements, and orders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    Limit,
    Offset,
    SeedModel,
    SeedTime,
    ServiceContext,
    Store,
    check_ref,
    check_unique,
    hints,
    iso,
    matches,
    newest_first,
    page,
    resolve_time,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "inventory"
OrderStatus = Literal["placed", "processing", "shipped", "delivered", "cancelled"]
ProductId = Annotated[str, Field(description="Product id (SKU), as listed by inventory_list_products.")]
OrderId = Annotated[str, Field(description="Order id, as listed by inventory_list_orders.")]
#: The statuses an order may move to from each status (cancelling has its own tool).
NEXT: dict[str, tuple[str, ...]] = {"placed": ("processing", "shipped"), "processing": ("shipped",),
                                    "shipped": ("delivered",), "delivered": (), "cancelled": ()}
#: Orders in these statuses hold their stock; cancelling one returns it.
OPEN = ("placed", "processing")


class Warehouse(SeedModel):
    """A place stock is kept."""

    id: str = Field(min_length=1)
    """Stable id, e.g. ``berlin``."""
    name: str = ""
    """Display name."""
    location: str = ""
    """City or address."""


class Product(SeedModel):
    """A product (SKU) and its stock."""

    id: str | None = None
    """The SKU, e.g. ``WID-100``; default ``sku-<n>`` by position."""
    name: str = Field(min_length=1)
    """Product name."""
    category: str = ""
    """Product category."""
    description: str = ""
    """What it is."""
    price: float = Field(0, ge=0)
    """Unit price, in the seed's currency."""
    stock: int = Field(0, ge=0)
    """Units on hand, after every seeded order."""
    reorder_point: int = Field(0, ge=0)
    """Reorder when stock falls to this level or below."""
    warehouse: str | None = None
    """Warehouse holding it; default the first warehouse."""
    discontinued: bool = False
    """No longer sold: new orders for it are refused."""


class OrderLine(SeedModel):
    """One line of an order."""

    product_id: str
    """The product's SKU."""
    quantity: int = Field(ge=1)
    """Units ordered."""
    unit_price: float | None = Field(None, ge=0)
    """Price per unit; default the product's price."""


class Order(SeedModel):
    """A customer order."""

    id: str | None = None
    """Stable id; default ``ord-<n>`` by position."""
    customer: str = Field(min_length=1)
    """Customer name."""
    email: Email | None = None
    """Customer address."""
    lines: list[OrderLine] = Field(min_length=1)
    """What was ordered."""
    status: OrderStatus = "placed"
    """Where the order stands: placed, processing, shipped, delivered or cancelled."""
    created: SeedTime = "now-1d"
    """When it was placed."""
    tracking: str = ""
    """Carrier tracking number, once shipped."""
    notes: str = ""
    """Free notes."""


class InventorySeed(SeedModel):
    """Initial state of the inventory service."""

    user: Email = "me@example.com"
    """The user's address: recorded on stock movements and status changes."""
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")
    """ISO 4217 code of every price."""
    warehouses: list[Warehouse] = Field(default=[Warehouse(id="main", name="Main warehouse")], min_length=1)
    """Warehouses; the first is the default."""
    products: list[Product] = []
    """Products."""
    orders: list[Order] = []
    """Orders (seeded orders do not change the seeded stock)."""

    @model_validator(mode="after")
    def _refs(self) -> "InventorySeed":
        warehouses = [w.id for w in self.warehouses]
        if len(set(warehouses)) != len(warehouses):
            raise ValueError("warehouses: an id is listed twice")
        products = check_unique(self.products, "sku", "products")
        check_unique(self.orders, "ord", "orders")
        for n, p in enumerate(self.products):
            check_ref(p.warehouse, warehouses, f"products[{n}].warehouse", "warehouse")
        for n, o in enumerate(self.orders):
            for k, line in enumerate(o.lines):
                check_ref(line.product_id, products, f"orders[{n}].lines[{k}].product_id", "product")
        return self


SEED = InventorySeed


def seed(store: Store, data: InventorySeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    store.set_meta("currency", data.currency)
    store.set_meta("warehouses", [w.model_dump() for w in data.warehouses])
    prices: dict[str, float] = {}
    for rid, p in zip(check_unique(data.products, "sku", "products"), data.products):
        prices[rid] = p.price
        store.insert("products", {**p.model_dump(), "id": rid, "warehouse": p.warehouse or data.warehouses[0].id})
    for rid, o in zip(check_unique(data.orders, "ord", "orders"), data.orders):
        lines = [{"product_id": x.product_id, "quantity": x.quantity,
                  "unit_price": prices.get(x.product_id, 0) if x.unit_price is None else x.unit_price}
                 for x in o.lines]
        store.insert("orders", {"id": rid, "customer": o.customer, "email": o.email, "status": o.status,
                                "lines": lines, "total": _total(lines), "currency": data.currency,
                                "created": resolve_time(o.created, store.now), "updated": resolve_time(o.created, store.now),
                                "tracking": o.tracking, "notes": o.notes, "cancel_reason": None})


def _total(lines: list[dict[str, Any]]) -> float:
    return round(sum(x["quantity"] * x["unit_price"] for x in lines), 2)


class LineIn(BaseModel):
    """One line of a new order."""

    model_config = ConfigDict(extra="forbid")

    product_id: str = Field(description="The product's SKU.")
    quantity: int = Field(ge=1, description="Units to order.")


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed inventory tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def user() -> str:
        return store.meta("user", "me@example.com")

    def view(p: dict[str, Any]) -> dict[str, Any]:
        return {**p, "needs_reorder": not p["discontinued"] and p["stock"] <= p["reorder_point"]}

    def warehouses() -> list[dict[str, Any]]:
        return store.meta("warehouses") or [{"id": "main", "name": "Main warehouse", "location": ""}]

    def move(product: dict[str, Any], delta: int, reason: str, order_id: str | None = None) -> str:
        """Change a product's stock and record the movement; returns the movement's id."""
        stock = product["stock"] + delta
        if stock < 0:
            raise ToolError(f"Not enough stock of {product['id']!r}: {product['stock']} on hand, "
                            f"{-delta} needed")
        store.update("products", product["id"], {"stock": stock})
        mid = store.new_id("movements", "mov")
        store.insert("movements", {"id": mid, "product_id": product["id"], "delta": delta, "stock_after": stock,
                                   "reason": reason, "order_id": order_id, "by": user(), "at": iso(store.now)})
        return mid

    @tool("inventory_list_warehouses", READ)
    def inventory_list_warehouses() -> dict:
        """List the warehouses with how many products and units each holds."""
        with store.tx():
            products = store.all("products")
        return {"warehouses": [{**w, "products": sum(p["warehouse"] == w["id"] for p in products),
                                "units": sum(p["stock"] for p in products if p["warehouse"] == w["id"])}
                               for w in warehouses()]}

    @tool("inventory_list_products", READ)
    def inventory_list_products(
        query: Annotated[str, Field(description="Words that must all occur in SKU, name, category or description.")] = "",
        category: Annotated[str | None, Field(description="Only this category (any case).")] = None,
        warehouse: Annotated[str | None, Field(description="Only products held in this warehouse id.")] = None,
        low_stock: Annotated[bool, Field(description="Only products at or below their reorder point.")] = False,
        offset: Offset = 0, limit: Limit = 20,
    ) -> dict:
        """List or search products by SKU, each with its stock and whether it needs reordering."""
        with store.tx():
            if warehouse is not None and warehouse not in {w["id"] for w in warehouses()}:
                raise ToolError(f"Unknown warehouse {warehouse!r}; warehouses: {', '.join(w['id'] for w in warehouses())}")
            items = [view(p) for p in store.all("products")]
        items = [p for p in items if matches(query, p["id"], p["name"], p["category"], p["description"])
                 and (category is None or p["category"].lower() == category.strip().lower())
                 and (warehouse is None or p["warehouse"] == warehouse) and (not low_stock or p["needs_reorder"])]
        items.sort(key=lambda p: p["id"])
        return {**page(items, offset, limit, "products"), "currency": store.meta("currency", "USD")}

    @tool("inventory_get_product", READ)
    def inventory_get_product(product_id: ProductId) -> dict:
        """Read a product with its latest stock movements and the open orders that hold it."""
        with store.tx():
            p = store.require("products", product_id, "product")
            moves = newest_first([m for m in store.all("movements") if m["product_id"] == product_id], "at")[:20]
            orders = [o["id"] for o in store.all("orders") if o["status"] in OPEN
                      and any(x["product_id"] == product_id for x in o["lines"])]
        return {**view(p), "currency": store.meta("currency", "USD"), "movements": moves, "open_orders": orders}

    @tool("inventory_adjust_stock", hints())
    def inventory_adjust_stock(product_id: ProductId,
                               delta: Annotated[int, Field(description="Units to add (positive) or remove (negative).")],
                               reason: Annotated[str, Field(min_length=1, description="Why, e.g. 'cycle count' or 'received PO-12'.")]) -> dict:
        """Add or remove stock of a product (a delivery, a count correction, damage); stock never goes below 0."""
        if delta == 0:
            raise ToolError("delta is 0: give the units to add (positive) or remove (negative)")
        with store.tx():
            p = store.require("products", product_id, "product")
            mid = move(p, delta, reason)
            store.audit("adjust_stock", [product_id, mid], ["stock"])
            p = store.require("products", product_id, "product")
        return {**view(p), "movement_id": mid}

    @tool("inventory_list_orders", READ)
    def inventory_list_orders(status: OrderStatus | None = None,
                              customer: Annotated[str | None, Field(description="Words of the customer's name or address.")] = None,
                              product_id: Annotated[str | None, Field(description="Only orders with a line of this SKU.")] = None,
                              offset: Offset = 0, limit: Limit = 20) -> dict:
        """List orders, newest first."""
        with store.tx():
            items = [o for o in store.all("orders") if (status is None or o["status"] == status)
                     and (customer is None or matches(customer, o["customer"], o["email"]))
                     and (product_id is None or any(x["product_id"] == product_id for x in o["lines"]))]
        return page(newest_first(items, "created"), offset, limit, "orders")

    @tool("inventory_get_order", READ)
    def inventory_get_order(order_id: OrderId) -> dict:
        """Read one order with its lines and total."""
        with store.tx():
            return store.require("orders", order_id, "order")

    @tool("inventory_create_order", hints())
    def inventory_create_order(customer: Annotated[str, Field(min_length=1, description="Customer name.")],
                               lines: Annotated[list[LineIn], Field(min_length=1, description="Products and quantities.")],
                               email: Annotated[Email | None, Field(description="Customer address.")] = None,
                               notes: str = "") -> dict:
        """Place an order; its stock is taken at once (refused when short), at the products' current prices."""
        with store.tx():
            wanted: dict[str, int] = {}
            for line in lines:
                p = store.require("products", line.product_id, "product")
                if p["discontinued"]:
                    raise ToolError(f"Product {p['id']!r} ({p['name']}) is discontinued; it cannot be ordered")
                wanted[p["id"]] = wanted.get(p["id"], 0) + line.quantity
            for sku, qty in wanted.items():
                p = store.require("products", sku, "product")
                if p["stock"] < qty:
                    raise ToolError(f"Not enough stock of {sku!r}: {p['stock']} on hand, {qty} ordered")
            oid = store.new_id("orders", "ord")
            moved = [move(store.require("products", sku, "product"), -qty, f"order {oid}", oid)
                     for sku, qty in wanted.items()]
            items = [{"product_id": x.product_id, "quantity": x.quantity,
                      "unit_price": store.require("products", x.product_id, "product")["price"]} for x in lines]
            now = iso(store.now)
            rec = {"id": oid, "customer": customer, "email": email, "status": "placed", "lines": items,
                   "total": _total(items), "currency": store.meta("currency", "USD"), "created": now, "updated": now,
                   "tracking": "", "notes": notes, "cancel_reason": None}
            store.insert("orders", rec)
            store.audit("create_order", [oid, *wanted, *moved], [k for k in rec if k != "id"] + ["stock"])
        return rec

    @tool("inventory_update_order_status", hints(idempotent=True))
    def inventory_update_order_status(
        order_id: OrderId,
        status: Annotated[Literal["processing", "shipped", "delivered"], Field(description="The next status.")],
        tracking: Annotated[str | None, Field(description="Carrier tracking number, when shipping.")] = None,
    ) -> dict:
        """Move an order on: placed -> processing -> shipped -> delivered (placed may ship directly)."""
        with store.tx():
            o = store.require("orders", order_id, "order")
            if o["status"] == status and tracking in (None, o["tracking"]):
                return {**o, "changed": []}
            if o["status"] != status and status not in NEXT[o["status"]]:
                allowed = ", ".join(NEXT[o["status"]]) or "none (it is final)"
                raise ToolError(f"Order {order_id!r} is {o['status']}; it can move to {allowed}, not {status}")
            changes: dict[str, Any] = {"status": status, "updated": iso(store.now)}
            if tracking is not None:
                changes["tracking"] = tracking
            rec, changed = store.update("orders", order_id, changes)
            store.audit("update_order", [order_id], changed)
        return {**rec, "changed": changed}

    @tool("inventory_cancel_order", hints(destructive=True, idempotent=True))
    def inventory_cancel_order(order_id: OrderId,
                               reason: Annotated[str, Field(min_length=1, description="Why, for the customer.")]) -> dict:
        """Cancel an order that has not shipped; its stock goes back. A cancelled order cannot be reopened."""
        with store.tx():
            o = store.require("orders", order_id, "order")
            if o["status"] == "cancelled":
                return o
            if o["status"] not in OPEN:
                raise ToolError(f"Order {order_id!r} is {o['status']}; only placed or processing orders can be cancelled")
            moved = []
            for x in o["lines"]:
                p = store.get("products", x["product_id"])
                if p is not None:
                    moved.append(move(p, x["quantity"], f"order {order_id} cancelled", order_id))
            rec, changed = store.update("orders", order_id, {"status": "cancelled", "cancel_reason": reason,
                                                             "updated": iso(store.now)})
            store.audit("cancel_order", [order_id, *dict.fromkeys(x["product_id"] for x in o["lines"]), *moved],
                        changed + ["stock"])
        return rec
