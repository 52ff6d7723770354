"""The names of every mock service and its tools; pure data, shared by host and container.

The host validates a spec's tool allow-list against this catalog without importing the
services themselves; the in-container registry checks that each service registers
exactly these names.
"""

from __future__ import annotations

SERVICE_TOOLS: dict[str, tuple[str, ...]] = {
    "mail": (
        "mail_list_folders", "mail_list_messages", "mail_search", "mail_read", "mail_send",
        "mail_reply", "mail_forward", "mail_draft", "mail_move", "mail_delete", "mail_mark_read",
        "mail_label", "mail_save_attachment",
    ),
    "calendar": (
        "calendar_list_calendars", "calendar_list_events", "calendar_get_event",
        "calendar_free_busy", "calendar_create_event", "calendar_update_event",
        "calendar_cancel_event", "calendar_respond",
    ),
    "contacts": (
        "contacts_search", "contacts_get_person", "contacts_lookup_email", "contacts_list_orgs",
        "contacts_get_org", "contacts_create_person", "contacts_update_person",
    ),
    "documents": (
        "documents_list", "documents_search", "documents_read", "documents_versions",
        "documents_create", "documents_edit", "documents_share", "documents_delete",
    ),
    "tickets": (
        "tickets_search", "tickets_get", "tickets_create", "tickets_update", "tickets_comment",
        "tickets_close",
    ),
    "crm": (
        "crm_search", "crm_get_account", "crm_get_deal", "crm_list_deals", "crm_create_account",
        "crm_create_contact", "crm_create_deal", "crm_update_deal", "crm_update_contact",
        "crm_log_activity", "crm_update_account", "crm_export", "crm_export_report",
    ),
    "chat": (
        "chat_list_channels", "chat_list_users", "chat_read", "chat_search", "chat_post", "chat_send_dm",
        "chat_react",
    ),
    "kb": (
        "kb_search", "kb_read_page", "kb_create_page", "kb_update_page", "kb_web_search",
        "kb_web_fetch",
    ),
    "expenses": (
        "expenses_list", "expenses_get", "expenses_get_policy", "expenses_submit",
        "expenses_approve", "expenses_reject", "expenses_list_transactions", "expenses_list_reports",
        "expenses_get_report", "expenses_create_report", "expenses_submit_report",
    ),
    "todo": (
        "todo_list", "todo_create", "todo_update", "todo_complete", "todo_delete",
    ),
    "inventory": (
        "inventory_list_warehouses", "inventory_list_products", "inventory_get_product", "inventory_adjust_stock",
        "inventory_list_orders", "inventory_get_order", "inventory_create_order", "inventory_update_order_status",
        "inventory_cancel_order",
    ),
    "config": (
        "config_list_flags", "config_get_flag", "config_set_flag", "config_list_settings", "config_get_setting",
        "config_set_setting", "config_history",
    ),
    "scheduler": (
        "scheduler_list_jobs", "scheduler_get_job", "scheduler_list_runs", "scheduler_get_run",
        "scheduler_trigger_run", "scheduler_pause_job", "scheduler_resume_job", "scheduler_update_schedule",
    ),
    "news": (
        "news_list_feeds", "news_list_items", "news_search_items", "news_read_item", "news_subscribe",
        "news_unsubscribe",
    ),
    "web": ("web_search", "web_fetch"),
    "memory": ("memory_write", "memory_search", "memory_list", "memory_forget"),
}

#: Every service tool name mapped to its service.
TOOL_SERVICE: dict[str, str] = {tool: svc for svc, tools in SERVICE_TOOLS.items() for tool in tools}

#: Every service tool name.
ALL_SERVICE_TOOLS: frozenset[str] = frozenset(TOOL_SERVICE)
