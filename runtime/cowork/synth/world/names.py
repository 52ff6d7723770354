"""Name pools of the seeded world: people of several cultures, companies, products, places.

Written for this project. Some first names occur in more than one culture on purpose (Maria,
Daniel, Sam, Ali, Anna), and :data:`NEAR_DUPLICATES` pairs names that differ by a letter or
two, so that tasks can ask an agent to tell "Jon Meyer" from "John Mayer".
"""

from __future__ import annotations

import unicodedata

#: culture -> (first names, family names). Order matters only for determinism.
CULTURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "german": (("Lena", "Jonas", "Maria", "Felix", "Anna", "Lukas", "Greta", "Tobias", "Daniel", "Katrin"),
               ("Becker", "Fischer", "Weber", "Keller", "Schmidt", "Wagner", "Brandt", "Hoffmann", "Vogel",
                "Zimmermann")),
    "english": (("Sam", "Grace", "Oliver", "Emily", "Daniel", "Hannah", "James", "Chloe", "Anna", "Thomas"),
                ("Clark", "White", "Turner", "Hughes", "Bennett", "Walsh", "Porter", "Reed", "Fletcher",
                 "Holt")),
    "indian": (("Priya", "Arjun", "Ravi", "Ananya", "Vikram", "Meera", "Rohan", "Kavya", "Sanjay", "Deepa"),
               ("Nair", "Iyer", "Mehta", "Raman", "Sharma", "Reddy", "Kapoor", "Menon", "Patel", "Joshi")),
    "chinese": (("Wei", "Li", "Mei", "Jun", "Xin", "Hao", "Ying", "Lei", "Fang", "Chen"),
                ("Wang", "Zhang", "Liu", "Chen", "Yang", "Zhao", "Huang", "Zhou", "Wu", "Xu")),
    "japanese": (("Yuki", "Haruto", "Aiko", "Ren", "Sakura", "Kenji", "Hana", "Daichi", "Emi", "Takumi"),
                 ("Tanaka", "Sato", "Suzuki", "Takahashi", "Watanabe", "Ito", "Nakamura", "Kobayashi", "Yamada",
                  "Mori")),
    "spanish": (("Maria", "Carlos", "Lucia", "Javier", "Sofia", "Diego", "Elena", "Pablo", "Carmen", "Tomás"),
                ("García", "Ortiz", "Reyes", "Morales", "Navarro", "Ortega", "Romero", "Castillo", "Vargas",
                 "Herrera")),
    "nigerian": (("Chidi", "Amara", "Tunde", "Ngozi", "Emeka", "Funmi", "Kelechi", "Zainab", "Segun", "Adaeze"),
                 ("Okafor", "Adeyemi", "Eze", "Balogun", "Okonkwo", "Nwosu", "Adebayo", "Obi", "Afolabi",
                  "Umeh")),
    "arabic": (("Omar", "Aisha", "Yusuf", "Layla", "Ali", "Fatima", "Karim", "Nadia", "Sam", "Mariam"),
               ("Haddad", "Khalil", "Mansour", "Nasser", "Saleh", "Hamdan", "Farouk", "Aziz", "Rahman",
                "Youssef")),
    "polish": (("Piotr", "Agnieszka", "Tomasz", "Katarzyna", "Marek", "Zofia", "Pawel", "Anna", "Jakub", "Ewa"),
               ("Kowalski", "Nowak", "Wiśniewski", "Wójcik", "Kamiński", "Lewandowski", "Zieliński", "Dąbrowski",
                "Mazur", "Krawczyk")),
    "turkish": (("Emre", "Elif", "Burak", "Zeynep", "Can", "Ayşe", "Ali", "Deniz", "Mehmet", "Selin"),
                ("Yılmaz", "Demir", "Kaya", "Şahin", "Çelik", "Aydın", "Öztürk", "Arslan", "Doğan", "Koç")),
    "brazilian": (("João", "Ana", "Lucas", "Beatriz", "Rafael", "Juliana", "Gabriel", "Maria", "Thiago",
                   "Camila"),
                  ("Silva", "Santos", "Oliveira", "Souza", "Costa", "Pereira", "Almeida", "Ferreira", "Rocha",
                   "Barbosa")),
    "swedish": (("Erik", "Ingrid", "Lars", "Sara", "Nils", "Astrid", "Oskar", "Karin", "Daniel", "Elin"),
                ("Lindqvist", "Berg", "Johansson", "Nilsson", "Lund", "Sandberg", "Ekström", "Holm", "Larsson",
                 "Nyberg")),
    "korean": (("Min-jun", "Seo-yeon", "Ji-ho", "Ha-eun", "Do-yun", "Su-bin", "Jae", "Yuna", "Hyun", "Mina"),
               ("Kim", "Lee", "Park", "Choi", "Jung", "Kang", "Cho", "Yoon", "Jang", "Lim")),
    "french": (("Camille", "Louis", "Chloé", "Hugo", "Léa", "Julien", "Manon", "Antoine", "Inès", "Mathieu"),
               ("Moreau", "Laurent", "Lefèvre", "Girard", "Bonnet", "Dupont", "Lambert", "Fontaine", "Rousseau",
                "Mercier")),
}

#: Pairs of full names an inattentive reader confuses; each world places at least one pair.
NEAR_DUPLICATES: tuple[tuple[str, str], ...] = (
    ("Jon Meyer", "John Mayer"), ("Catherine Smyth", "Katherine Smith"), ("Mohammed Khan", "Muhammad Khan"),
    ("Sara Lindqvist", "Sarah Lindquist"), ("Steven Clarke", "Stephen Clark"), ("Aleksander Nowak", "Alexander Novak"),
    ("Mark Petersen", "Marc Peterson"), ("Jakob Fischer", "Jacob Fisher"), ("Anne Lefevre", "Ann Lefebvre"),
    ("Sean O'Neill", "Shawn O'Neil"),
)

#: Offices: (city, IANA zone, country code, usual working hours as (start, end) minutes).
OFFICES: tuple[tuple[str, str, str], ...] = (
    ("Berlin", "Europe/Berlin", "DE"), ("London", "Europe/London", "GB"), ("New York", "America/New_York", "US"),
    ("San Francisco", "America/Los_Angeles", "US"), ("Singapore", "Asia/Singapore", "SG"),
    ("Bangalore", "Asia/Kolkata", "IN"), ("Sydney", "Australia/Sydney", "AU"), ("São Paulo", "America/Sao_Paulo", "BR"),
    ("Tokyo", "Asia/Tokyo", "JP"), ("Lagos", "Africa/Lagos", "NG"),
)

#: Working hours people keep, in minutes after local midnight.
WORK_HOURS: tuple[tuple[int, int], ...] = ((8 * 60, 16 * 60), (9 * 60, 17 * 60), (9 * 60 + 30, 18 * 60),
                                           (10 * 60, 18 * 60), (7 * 60 + 30, 15 * 60 + 30))

#: The organisation itself: (name, domain, what it sells).
COMPANIES: tuple[tuple[str, str, str], ...] = (
    ("Lumen Analytics", "lumen-analytics.com", "analytics software"),
    ("Brightwave Systems", "brightwave.io", "network equipment"),
    ("Orbit Software", "orbitsoft.com", "field-service software"),
    ("Harbor Devices", "harbordevices.com", "medical devices"),
    ("Kestrel Robotics", "kestrel-robotics.com", "warehouse robots"),
    ("Tessellate Labs", "tessellate.dev", "design tools"),
    ("Northpeak Energy", "northpeak-energy.com", "battery storage"),
    ("Quarry Data", "quarrydata.io", "data pipelines"),
)

#: Parts of customer, vendor and partner names.
NAME_HEADS: tuple[str, ...] = (
    "Blue Harbor", "Cedar", "Falcon", "Granite", "Juniper", "Marlow", "Nimbus", "Orchid", "Pinewood", "Redline",
    "Saffron", "Tidewater", "Umber", "Vantage", "Willow", "Zephyr", "Atlas", "Beacon", "Copperfield", "Driftwood",
    "Evergreen", "Foxglove", "Halcyon", "Ironbridge", "Lakeshore", "Meridian", "Northgate", "Oakridge", "Polaris",
    "Riverbend", "Silverline", "Starling", "Summit", "Thornbury", "Upland", "Westwind",
)
NAME_TAILS: tuple[tuple[str, str], ...] = (
    ("Foods", "food & beverage"), ("Health", "healthcare"), ("Freight", "logistics"), ("Retail", "retail"),
    ("Bank", "financial services"), ("Pharma", "pharmaceuticals"), ("Motors", "automotive"),
    ("Energy", "energy"), ("Media", "media"), ("Telecom", "telecommunications"), ("Insurance", "insurance"),
    ("Hotels", "hospitality"), ("Steel", "manufacturing"), ("Labs", "research"),
)
LEGAL: dict[str, tuple[str, ...]] = {
    "DE": ("GmbH", "AG"), "GB": ("Ltd", "plc"), "US": ("Inc", "LLC", "Corp"), "SG": ("Pte Ltd",), "IN": ("Pvt Ltd",),
    "AU": ("Pty Ltd",), "BR": ("Ltda", "S.A."), "JP": ("KK",), "NG": ("Ltd",),
}
TLDS: dict[str, tuple[str, ...]] = {
    "DE": ("de", "com"), "GB": ("co.uk", "com"), "US": ("com", "io"), "SG": ("com.sg", "com"), "IN": ("in", "com"),
    "AU": ("com.au",), "BR": ("com.br",), "JP": ("co.jp", "jp"), "NG": ("com.ng",),
}

VENDOR_KINDS: tuple[tuple[str, str], ...] = (
    ("Cloud hosting", "Cloud"), ("Office supplies", "Supplies"), ("Travel agency", "Travel"),
    ("Legal counsel", "Legal"), ("Catering", "Catering"), ("Print shop", "Print"), ("Payroll services", "Payroll"),
    ("Security audits", "Security"), ("Hardware reseller", "Hardware"), ("Translation", "Translations"),
)
AUDITORS: tuple[str, ...] = ("Kerr & Whitfield Audit", "Mosaic Assurance", "Baird Lindgren Partners",
                             "Crestline Auditors")
RECRUITERS: tuple[str, ...] = ("TalentBridge Search", "Northstar Recruiting", "Keystone Talent",
                               "Pathway People")

DEPARTMENTS: dict[str, tuple[str, ...]] = {
    # department -> titles, the first is its head
    "Executive": ("Chief Executive Officer", "Chief Operating Officer"),
    "Sales": ("VP Sales", "Account Executive", "Sales Development Rep", "Account Manager"),
    "Customer Success": ("Head of Customer Success", "Customer Success Manager", "Support Engineer"),
    "Finance": ("CFO", "Controller", "Accountant", "Financial Analyst"),
    "Engineering": ("VP Engineering", "Engineering Manager", "Software Engineer", "Site Reliability Engineer"),
    "IT": ("IT Manager", "IT Support Specialist", "Systems Administrator"),
    "People": ("Head of People", "HR Business Partner", "Recruiter"),
    "Operations": ("Head of Operations", "Executive Assistant", "Operations Analyst", "Office Manager"),
    "Legal": ("General Counsel", "Legal Counsel"),
    "Marketing": ("VP Marketing", "Product Marketing Manager", "Content Lead"),
}

PRODUCT_WORDS: tuple[tuple[str, str], ...] = (
    ("Sensor Kit", "hardware"), ("Gateway", "hardware"), ("Edge Node", "hardware"), ("Docking Station", "hardware"),
    ("Battery Pack", "hardware"), ("Cable Set", "accessories"), ("Mounting Bracket", "accessories"),
    ("Carry Case", "accessories"), ("Power Adapter", "accessories"), ("Support Plan", "services"),
    ("Training Day", "services"), ("Installation", "services"), ("Analytics Licence", "software"),
    ("Fleet Console Licence", "software"), ("API Add-on", "software"),
)
PROJECT_WORDS: tuple[str, ...] = (
    "Aurora", "Basalt", "Cobalt", "Delta", "Ember", "Fjord", "Garnet", "Helix", "Indigo", "Jasper", "Kite",
    "Lantern", "Mosaic", "Nova", "Onyx", "Prism", "Quartz", "Raven", "Sable", "Tundra",
)
PROJECT_GOALS: tuple[str, ...] = (
    "ERP migration", "customer portal relaunch", "data-centre exit", "SOC 2 readiness", "pricing overhaul",
    "new office fit-out", "warehouse automation pilot", "CRM consolidation", "mobile app rewrite",
    "partner programme launch", "support tooling upgrade", "billing system replacement",
)


def ascii_fold(text: str) -> str:
    """``text`` with accents and special letters folded to ASCII ("Wójcik" -> "Wojcik")."""
    special = str.maketrans({"ß": "ss", "ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "ı": "i", "æ": "ae", "đ": "d"})
    return unicodedata.normalize("NFKD", text.translate(special)).encode("ascii", "ignore").decode()


def slug(text: str, sep: str = "-") -> str:
    """Lower-case ASCII letters and digits of ``text``, words joined by ``sep``."""
    words = "".join(c if c.isalnum() else " " for c in ascii_fold(text).lower()).split()
    return sep.join(words)
