"""The entities of a seeded world: frozen dataclasses holding plain values and ids.

Entities refer to each other by id (``person``, ``org``, ``account``, ...); every reference
resolves within the world (:func:`cowork.synth.world.checks.problems` proves it). Times are
timezone-aware UTC ``datetime``s, days are ``date``s; serialising turns both into ISO text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal

#: One spreadsheet: sheet name -> rows of cells (str, int, float, date or an "=..." formula).
Sheets = dict[str, list[list[Any]]]
#: One text document: blocks {"heading": str, "level": int} | {"paragraph": str} | {"table": rows}.
Blocks = list[dict[str, Any]]
OfficeKind = Literal["xlsx", "docx", "pdf"]


@dataclass(frozen=True, slots=True)
class Office:
    """A place people work from, with its time zone."""

    id: str
    city: str
    tz: str
    country: str


@dataclass(frozen=True, slots=True)
class Person:
    """An employee of the organisation."""

    id: str
    name: str
    email: str
    handle: str
    culture: str
    department: str
    title: str
    office: str
    tz: str
    work_start: int
    """Minutes after local midnight."""
    work_end: int
    manager: str | None
    assistant: str | None
    phone: str
    ooo: tuple[tuple[date, date], ...] = ()
    """Out-of-office periods, first and last day inclusive."""


@dataclass(frozen=True, slots=True)
class Org:
    """An organisation: the company itself, a customer, vendor, auditor, recruiter, or a look-alike."""

    id: str
    name: str
    domain: str
    kind: Literal["self", "customer", "vendor", "auditor", "recruiter", "lookalike"]
    industry: str
    country: str
    address: str
    phone: str
    imitates: str | None = None
    """For a look-alike: the id of the organisation whose domain it imitates."""


@dataclass(frozen=True, slots=True)
class External:
    """A person outside the organisation."""

    id: str
    name: str
    email: str
    org: str
    title: str
    phone: str


@dataclass(frozen=True, slots=True)
class Account:
    """A customer account in the CRM."""

    id: str
    org: str
    tier: str
    status: str
    """prospect, active, inactive or churned."""
    revenue: float
    currency: str
    owner: str
    contacts: tuple[str, ...]
    last_contact: datetime
    notes: str


@dataclass(frozen=True, slots=True)
class Deal:
    """A sales opportunity with an account."""

    id: str
    account: str
    name: str
    stage: str
    amount: float
    currency: str
    close_date: date
    owner: str


@dataclass(frozen=True, slots=True)
class Activity:
    """A logged touchpoint in an account's history."""

    id: str
    account: str
    contact: str | None
    deal: str | None
    kind: str
    """call, email, meeting, note or task."""
    subject: str
    notes: str
    at: datetime
    by: str


@dataclass(frozen=True, slots=True)
class Document:
    """A text document of the drive (policy versions, plans, notes)."""

    id: str
    title: str
    folder: str
    owner: str
    text: str
    modified: datetime
    shared_with: tuple[tuple[str, str], ...] = ()
    """(person id, role) pairs."""
    history: tuple[tuple[str, str, datetime], ...] = ()
    """Earlier versions, oldest first: (text, author person id, saved at)."""
    visibility: Literal["private", "org"] = "private"


@dataclass(frozen=True, slots=True)
class PolicyVersion:
    """One version of a policy."""

    version: str
    status: str
    """superseded, current or draft."""
    effective: date
    document: str
    """Id of the document holding its text."""
    summary: str


@dataclass(frozen=True, slots=True)
class Policy:
    """A company policy and its versions, oldest first."""

    id: str
    name: str
    owner: str
    versions: tuple[PolicyVersion, ...]


@dataclass(frozen=True, slots=True)
class Project:
    """An internal or customer project."""

    id: str
    name: str
    goal: str
    owner: str
    members: tuple[str, ...]
    account: str | None
    budget: float
    currency: str
    spent: float
    start: date
    end: date
    status: str
    """planned, active, at-risk or done."""
    documents: tuple[str, ...]
    files: tuple[str, ...]
    """Paths of office files about the project."""


@dataclass(frozen=True, slots=True)
class OfficeFile:
    """A spreadsheet, word-processor document or PDF, kept as data (rendered elsewhere)."""

    path: str
    kind: OfficeKind
    title: str
    owner: str
    data: Any
    """:data:`Sheets` for xlsx, :data:`Blocks` for docx and pdf."""


@dataclass(frozen=True, slots=True)
class MailMessage:
    """One message of a thread."""

    id: str
    thread: str
    sender: str
    """An address: of a person, an external contact, or a look-alike sender."""
    to: tuple[str, ...]
    cc: tuple[str, ...]
    bcc: tuple[str, ...]
    subject: str
    body: str
    at: datetime
    kind: Literal["original", "reply", "forward"]
    in_reply_to: str | None
    attachments: tuple[str, ...] = ()
    """Paths of office files."""
    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Thread:
    """A mail conversation."""

    id: str
    topic: str
    subject: str
    messages: tuple[MailMessage, ...]


@dataclass(frozen=True, slots=True)
class Meeting:
    """A meeting, or a weekly series of them (``weeks`` > 1): one entry per occurrence on calendars."""

    id: str
    title: str
    organizer: str
    attendees: tuple[str, ...]
    tz: str
    first: datetime
    """Start of the first occurrence, UTC."""
    minutes: int
    weeks: int
    location: str
    description: str
    declined: tuple[str, ...] = ()
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class TicketComment:
    """A comment on a ticket."""

    author: str
    """An address of a person or an external contact."""
    body: str
    internal: bool
    at: datetime


@dataclass(frozen=True, slots=True)
class Ticket:
    """A helpdesk ticket with its comment history."""

    id: str
    title: str
    description: str
    status: str
    """new, open, pending, resolved or closed."""
    priority: str
    """low, normal, high or urgent."""
    requester: str
    """An address of a person or an external contact."""
    requester_name: str
    department: str
    category: str
    assignee: str | None
    """A person id (an agent of the helpdesk)."""
    tags: tuple[str, ...]
    created: datetime
    comments: tuple[TicketComment, ...]


@dataclass(frozen=True, slots=True)
class ChatChannel:
    """A channel or a direct-message conversation."""

    id: str
    name: str
    topic: str
    kind: Literal["channel", "dm"]
    private: bool
    members: tuple[str, ...]
    """Person ids."""


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """A chat message, top level or in a thread."""

    id: str
    channel: str
    author: str
    text: str
    at: datetime
    thread: str | None = None
    reactions: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class KbArticle:
    """A knowledge-base page."""

    id: str
    title: str
    space: str
    body: str
    author: str
    updated: datetime
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Expense:
    """An expense claim."""

    id: str
    employee: str
    amount: float
    currency: str
    category: str
    merchant: str
    day: date
    description: str
    receipt: bool
    status: str
    """submitted, approved, rejected or reimbursed."""
    approver: str | None


@dataclass(frozen=True, slots=True)
class CardTransaction:
    """A corporate-card transaction."""

    id: str
    holder: str
    day: date
    amount: float
    currency: str
    merchant: str
    category: str
    account: str
    memo: str


@dataclass(frozen=True, slots=True)
class ExpenseReport:
    """An expense report bundling claims and transactions."""

    id: str
    title: str
    employee: str
    expenses: tuple[str, ...]
    transactions: tuple[str, ...]
    status: Literal["draft", "submitted", "approved", "rejected", "reimbursed"]
    created: datetime
    file: str | None = None
    """Path of the spreadsheet export of the report, when one was made."""


@dataclass(frozen=True, slots=True)
class Product:
    """A product (SKU) with its stock."""

    id: str
    name: str
    category: str
    price: float
    stock: int
    reorder_point: int
    warehouse: str
    discontinued: bool
    vendor: str
    """Org id of the vendor supplying it."""


@dataclass(frozen=True, slots=True)
class OrderLine:
    """One line of an order."""

    product: str
    quantity: int
    unit_price: float


@dataclass(frozen=True, slots=True)
class Order:
    """A customer order."""

    id: str
    account: str
    contact: str
    lines: tuple[OrderLine, ...]
    status: str
    """placed, processing, shipped, delivered or cancelled."""
    created: datetime
    tracking: str


@dataclass(frozen=True, slots=True)
class Flag:
    """A feature flag."""

    key: str
    description: str
    enabled: bool
    rollout: int
    environments: tuple[str, ...]
    owner: str
    updated: datetime


@dataclass(frozen=True, slots=True)
class Setting:
    """A typed service setting."""

    key: str
    type: Literal["string", "int", "float", "bool", "json"]
    value: Any
    description: str
    updated: datetime


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """An earlier change of a flag or setting."""

    id: str
    target: Literal["flag", "setting"]
    key: str
    old: dict[str, Any]
    new: dict[str, Any]
    by: str
    at: datetime
    reason: str


@dataclass(frozen=True, slots=True)
class Job:
    """A scheduled job."""

    id: str
    name: str
    schedule: str
    command: str
    description: str
    enabled: bool
    owner: str


@dataclass(frozen=True, slots=True)
class JobRun:
    """One run of a job."""

    id: str
    job: str
    status: str
    """succeeded, failed or cancelled."""
    started: datetime
    minutes: int
    log: str


@dataclass(frozen=True, slots=True)
class NewsItem:
    """An article of a feed."""

    id: str
    feed: str
    title: str
    link: str
    published: datetime
    author: str
    summary: str
    content: str
    read: bool
    mentions: tuple[str, ...] = ()
    """Org ids the article is about."""


@dataclass(frozen=True, slots=True)
class Feed:
    """A news feed; subscribed or only in the offline directory."""

    id: str
    title: str
    url: str
    description: str
    subscribed: bool


@dataclass(frozen=True, slots=True)
class TodoItem:
    """A task on someone's to-do list."""

    id: str
    owner: str
    list: str
    title: str
    notes: str
    due: date | None
    priority: Literal["low", "normal", "high"]
    done: bool
    refs: tuple[str, ...] = ()
    """Ids of the entities it is about (projects, accounts, tickets)."""


@dataclass(frozen=True, slots=True)
class Warehouse:
    """A stock location, at an office."""

    id: str
    name: str
    office: str


@dataclass(frozen=True)
class WorldData:
    """Every entity of one world, plus who the user is; :class:`cowork.synth.world.World` adds
    the methods."""

    seed: int
    size: str
    clock: datetime
    """The world's "now": tasks set their spec clock to it."""
    company: str
    """Org id of the organisation itself."""
    user: str
    """Person id of the user the agent works for."""
    offices: tuple[Office, ...]
    people: tuple[Person, ...]
    orgs: tuple[Org, ...]
    externals: tuple[External, ...]
    accounts: tuple[Account, ...]
    deals: tuple[Deal, ...]
    activities: tuple[Activity, ...]
    projects: tuple[Project, ...]
    policies: tuple[Policy, ...]
    documents: tuple[Document, ...]
    files: tuple[OfficeFile, ...]
    threads: tuple[Thread, ...]
    meetings: tuple[Meeting, ...]
    tickets: tuple[Ticket, ...]
    channels: tuple[ChatChannel, ...]
    chat: tuple[ChatMessage, ...]
    kb: tuple[KbArticle, ...]
    expenses: tuple[Expense, ...]
    transactions: tuple[CardTransaction, ...]
    reports: tuple[ExpenseReport, ...]
    warehouses: tuple[Warehouse, ...]
    products: tuple[Product, ...]
    orders: tuple[Order, ...]
    flags: tuple[Flag, ...]
    settings: tuple[Setting, ...]
    config_history: tuple[ConfigChange, ...]
    jobs: tuple[Job, ...]
    runs: tuple[JobRun, ...]
    feeds: tuple[Feed, ...]
    news: tuple[NewsItem, ...]
    todos: tuple[TodoItem, ...]
    _index: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def get(self, entity_id: str) -> Any:
        """The entity (person, org, account, ...) with this id; KeyError when there is none."""
        if not self._index:
            for name in ("offices", "people", "orgs", "externals", "accounts", "deals", "projects", "policies",
                         "documents", "threads", "meetings", "tickets", "channels", "kb", "products", "orders",
                         "jobs", "feeds", "warehouses", "expenses", "transactions", "reports", "activities",
                         "todos"):
                for item in getattr(self, name):
                    self._index[item.id] = item
        return self._index[entity_id]

    def person_by_email(self, address: str) -> Person | None:
        """The employee with this address, or None."""
        for p in self.people:
            if p.email == address:
                return p
        return None
