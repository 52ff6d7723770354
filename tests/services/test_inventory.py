"""Inventory tools: products and stock, movements, orders and their workflow."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def inv(env):
    return dump_state(env.ctx.db)["inventory"]


class TestProducts:
    async def test_warehouses(self, client):
        out = await call(client, "inventory_list_warehouses")
        assert [(w["id"], w["products"], w["units"]) for w in out["warehouses"]] == [("berlin", 2, 40), ("austin", 1, 3)]

    async def test_list_and_filters(self, client):
        ids = lambda out: [p["id"] for p in out["products"]]
        out = await call(client, "inventory_list_products")
        assert ids(out) == ["GAD-200", "OLD-1", "WID-100"] and out["currency"] == "EUR"
        assert {p["id"]: p["needs_reorder"] for p in out["products"]} == {"GAD-200": True, "OLD-1": False, "WID-100": False}
        assert out["products"][2]["warehouse"] == "berlin"  # the first warehouse by default
        assert ids(await call(client, "inventory_list_products", low_stock=True)) == ["GAD-200"]
        assert ids(await call(client, "inventory_list_products", category="DEVICES")) == ["GAD-200", "OLD-1"]
        assert ids(await call(client, "inventory_list_products", warehouse="austin")) == ["GAD-200"]
        assert ids(await call(client, "inventory_list_products", query="wid")) == ["WID-100"]
        await fails(client, "inventory_list_products", "Unknown warehouse 'paris'; warehouses: berlin, austin", warehouse="paris")

    async def test_get_product(self, client):
        p = await call(client, "inventory_get_product", product_id="WID-100")
        assert p["stock"] == 40 and p["open_orders"] == ["ord-1"] and p["movements"] == []
        await fails(client, "inventory_get_product", "Unknown product id 'X'", product_id="X")

    async def test_adjust_stock_records_a_movement(self, client, env):
        out = await call(client, "inventory_adjust_stock", product_id="GAD-200", delta=10, reason="received PO-7")
        assert out["stock"] == 13 and out["needs_reorder"] is False
        mov = inv(env)["movements"][out["movement_id"]]
        assert mov == {"id": "mov-1", "product_id": "GAD-200", "delta": 10, "stock_after": 13, "reason": "received PO-7",
                       "order_id": None, "by": ME, "at": "2026-03-02T09:00:00Z"}
        assert (await call(client, "inventory_get_product", product_id="GAD-200"))["movements"] == [mov]
        assert actions(env) == [("inventory", "adjust_stock")]
        await fails(client, "inventory_adjust_stock", r"Not enough stock of 'GAD-200': 13 on hand, 14 needed",
                    product_id="GAD-200", delta=-14, reason="damaged")
        await fails(client, "inventory_adjust_stock", "delta is 0", product_id="GAD-200", delta=0, reason="x")
        await fails(client, "inventory_adjust_stock", "reason", product_id="GAD-200", delta=1, reason="")
        await fails(client, "inventory_adjust_stock", "Unknown product id", product_id="X", delta=1, reason="x")
        assert inv(env)["products"]["GAD-200"]["stock"] == 13


class TestOrders:
    async def test_list_and_get(self, client):
        out = await call(client, "inventory_list_orders")
        assert [o["id"] for o in out["orders"]] == ["ord-1", "ord-2"]
        o2 = await call(client, "inventory_get_order", order_id="ord-2")
        assert o2["lines"] == [{"product_id": "GAD-200", "quantity": 1, "unit_price": 90},
                               {"product_id": "WID-100", "quantity": 2, "unit_price": 12.5}]
        assert o2["total"] == 115 and o2["currency"] == "EUR" and o2["tracking"] == "1Z999"
        ids = lambda out: [o["id"] for o in out["orders"]]
        assert ids(await call(client, "inventory_list_orders", status="shipped")) == ["ord-2"]
        assert ids(await call(client, "inventory_list_orders", customer="initech")) == ["ord-1"]
        assert ids(await call(client, "inventory_list_orders", product_id="GAD-200")) == ["ord-2"]
        await fails(client, "inventory_get_order", "Unknown order id 'ord-9'", order_id="ord-9")

    async def test_create_takes_stock(self, client, env):
        out = await call(client, "inventory_create_order", customer="Hooli", email="Gavin@Hooli.example",
                         lines=[{"product_id": "WID-100", "quantity": 3}, {"product_id": "GAD-200", "quantity": 1},
                                {"product_id": "WID-100", "quantity": 2}])
        assert out["id"] == "ord-3" and out["status"] == "placed" and out["email"] == "gavin@hooli.example"
        assert out["total"] == 161.5 and out["created"] == "2026-03-02T09:00:00Z"
        state = inv(env)
        assert state["products"]["WID-100"]["stock"] == 35 and state["products"]["GAD-200"]["stock"] == 2
        assert sorted((m["product_id"], m["delta"], m["order_id"]) for m in state["movements"].values()) == [
            ("GAD-200", -1, "ord-3"), ("WID-100", -5, "ord-3")]
        assert actions(env) == [("inventory", "create_order")]

    async def test_create_refusals_change_nothing(self, client, env):
        before = inv(env)
        await fails(client, "inventory_create_order", r"Not enough stock of 'GAD-200': 3 on hand, 4 ordered",
                    customer="x", lines=[{"product_id": "WID-100", "quantity": 1}, {"product_id": "GAD-200", "quantity": 4}])
        await fails(client, "inventory_create_order", r"'OLD-1' \(Old gizmo\) is discontinued", customer="x",
                    lines=[{"product_id": "OLD-1", "quantity": 1}])
        await fails(client, "inventory_create_order", "Unknown product id 'NOPE'", customer="x",
                    lines=[{"product_id": "NOPE", "quantity": 1}])
        await fails(client, "inventory_create_order", "quantity", customer="x", lines=[{"product_id": "WID-100", "quantity": 0}])
        await fails(client, "inventory_create_order", "lines", customer="x", lines=[])
        assert inv(env) == before and actions(env) == []

    async def test_status_workflow(self, client, env):
        out = await call(client, "inventory_update_order_status", order_id="ord-1", status="processing")
        assert out["changed"] == ["status", "updated"]
        out = await call(client, "inventory_update_order_status", order_id="ord-1", status="shipped", tracking="1Z1")
        assert out["status"] == "shipped" and out["tracking"] == "1Z1"
        assert (await call(client, "inventory_update_order_status", order_id="ord-1", status="shipped"))["changed"] == []
        await fails(client, "inventory_update_order_status", "Order 'ord-1' is shipped; it can move to delivered, not processing",
                    order_id="ord-1", status="processing")
        await call(client, "inventory_update_order_status", order_id="ord-1", status="delivered")
        await fails(client, "inventory_update_order_status", r"it can move to none \(it is final\)", order_id="ord-1",
                    status="shipped")
        await fails(client, "inventory_update_order_status", "status", order_id="ord-1", status="cancelled")
        assert actions(env) == [("inventory", "update_order")] * 3

    async def test_cancel_returns_stock(self, client, env):
        out = await call(client, "inventory_cancel_order", order_id="ord-1", reason="customer asked")
        assert out["status"] == "cancelled" and out["cancel_reason"] == "customer asked"
        assert inv(env)["products"]["WID-100"]["stock"] == 45
        assert (await call(client, "inventory_cancel_order", order_id="ord-1", reason="again")) == out
        assert inv(env)["products"]["WID-100"]["stock"] == 45 and actions(env) == [("inventory", "cancel_order")]
        await fails(client, "inventory_cancel_order", "Order 'ord-2' is shipped; only placed or processing",
                    order_id="ord-2", reason="late")
        await fails(client, "inventory_cancel_order", "reason", order_id="ord-1", reason="")
        await fails(client, "inventory_update_order_status", "Order 'ord-1' is cancelled", order_id="ord-1", status="shipped")
