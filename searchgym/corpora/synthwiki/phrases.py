"""Word lists and filler sentences from which synthwiki passages are written.

Filler sentences add colour and length but never state a fact that a question asks
about. They also avoid every word that an oracle query leans on (see
:data:`QUERY_STEMS`), so that a query such as ``"Velmora settled"`` finds the passage
that states the settlement year and not a passage that merely mentions Velmora. The
tests check both rules.
"""

from __future__ import annotations

#: Stems (English Snowball) of the words that oracle queries use next to an entity name.
#: Only the sentence that states the fact may contain them.
QUERY_STEMS = frozenset(
    {"born", "birth", "studi", "educ", "attend", "die", "death", "dead", "found", "foundat", "form",
     "headquart", "base", "locat", "publish", "citi", "settl", "popul", "capit", "independ",
     "presid", "first"}
)

# ------------------------------------------------------------------------------ people

FIELDS = {
    "arts": ("painter", "sculptor", "photographer", "architect"),
    "letters": ("poet", "novelist", "historian", "journalist", "publisher", "writer", "philosopher",
                "theologian", "scholar", "educator"),
    "music": ("composer", "singer", "guitarist", "pianist", "drummer"),
    "science": ("astronomer", "mathematician", "botanist", "chemist", "physician", "cartographer"),
    "trade": ("engineer", "industrialist", "merchant", "banker", "inventor"),
    "public": ("lawyer", "politician", "diplomat"),
    "sport": ("athlete", "coach"),
    "stage": ("actor",),
}
FIELD_OF = {occupation: field for field, occupations in FIELDS.items() for occupation in occupations}

TOPICS = {
    "arts": ("harbour scenes", "mountain landscapes", "portraits of dock workers", "church interiors",
             "winter light", "market squares", "river bridges", "still lifes of glass and fruit"),
    "letters": ("coastal folklore", "the history of trade guilds", "moral philosophy", "long-distance travel",
                "rural dialects", "the lives of sailors", "old legal codes", "the art of memory"),
    "music": ("choral settings of old ballads", "dance rhythms", "brass arrangements", "slow string pieces",
              "folk melodies", "improvised duets", "songs about the sea", "organ preludes"),
    "science": ("comets and meteor showers", "alpine flora", "the chemistry of dyes", "tidal currents",
                "infectious fevers", "the measurement of coastlines", "prime numbers", "lichens and mosses"),
    "trade": ("steam pumps", "river canals", "cheap steel", "refrigerated cargo", "telegraph lines",
              "grain markets", "cast-iron bridges", "precision clocks"),
    "public": ("land reform", "maritime law", "public schooling", "the rights of tenants",
               "treaties with neighbouring states", "postal reform", "the abolition of tolls", "railway law"),
    "sport": ("long-distance running", "rowing technique", "youth training", "tactical drills",
              "endurance training", "team discipline", "sprint starts", "fitness for amateurs"),
    "stage": ("comic roles", "tragic heroines and heroes", "touring theatre", "radio drama",
              "village theatre", "classical verse drama", "silent film", "improvised comedy"),
}
SUBJECTS = ("law", "medicine", "mathematics", "history", "chemistry", "philosophy", "engineering",
            "music", "classics", "economics", "botany", "architecture")
TRADES = ("carpenter", "baker", "schoolteacher", "ferryman", "clerk", "weaver", "shopkeeper", "miller")
ADJECTIVES = ("", "", "noted ", "prominent ", "influential ", "celebrated ", "respected ")

CHILDHOOD = (
    "{He} grew up in a household of modest means and showed an early talent for {topic}.",
    "As a child {he} spent long summers in {place}, which later shaped {his} interest in {topic2}.",
    "{His} parents encouraged {his} curiosity, and by the age of twelve {he} was reading about {topic}.",
    "{He} was a quiet and studious child who kept notebooks full of drawings and lists.",
)
WORK = {
    "arts": (
        "{Surname} worked mostly from a small studio in {place} and became known for {topic}.",
        "{His} early pieces on {topic} were shown in {place} in {year} and drew wide praise.",
        "Critics admired the calm precision of {his} work, especially {his} sketches of {topic}.",
    ),
    "letters": (
        "{Surname} wrote widely on {topic} and corresponded with many writers of {his} time.",
        "{His} best-known book, a long essay on {topic}, appeared in {year}.",
        "For several years {he} lived in {place}, where {he} gave public lectures on {topic}.",
    ),
    "music": (
        "{Surname} became known for {topic} and performed regularly in {place}.",
        "{His} recordings from around {year} are still regarded as a model of {topic}.",
        "{He} toured widely and was admired for {his} work on {topic}.",
    ),
    "science": (
        "{Surname} carried out careful observations of {topic} and described them in a report of {year}.",
        "{His} work on {topic} was later taken up by a generation of younger researchers.",
        "{He} spent several years in {place}, where {he} kept detailed notebooks on {topic}.",
    ),
    "trade": (
        "{Surname} made {his} name with {topic}, an interest that began during a stay in {place}.",
        "{He} held several patents related to {topic}, the earliest granted in {year}.",
        "Contemporaries described {him} as a shrewd negotiator with a keen eye for {topic}.",
    ),
    "public": (
        "{Surname} was a forceful advocate of {topic} and argued for it in many public debates.",
        "In {year} {he} drafted a widely discussed proposal on {topic}.",
        "{He} spent some years in {place}, where {he} practised law and wrote on {topic}.",
    ),
    "sport": (
        "{Surname} was admired for {his} dedication to {topic}.",
        "{He} won several regional titles and later wrote a short manual on {topic}.",
        "After retiring from competition {he} coached young athletes in {place}, stressing {topic}.",
    ),
    "stage": (
        "{Surname} became popular for {topic} and appeared on stages across {place} and beyond.",
        "{His} performance in a revival staged in {year} is still remembered.",
        "{He} ran a small touring company that specialised in {topic}.",
    ),
}
# Only for people who have died.
LEGACY = (
    "{Surname} is remembered as one of the most original {occupations} of {his} generation.",
    "A street in {place2} was later named in {his} honour.",
    "{His} papers and letters are kept in a private archive in {place2}.",
)
# Only for people still alive.
LATER_LIFE = (
    "{Surname} still lives and works in {place2}.",
    "In recent years {he} has taught younger {occupations} in {place2}.",
)
# A second passage names its subject once, in its opening sentence, and then uses
# pronouns, so that the first passage (which states the facts) mentions the name more
# often and stays the better match for "<name> <attribute>" queries.
CAREER_OPENERS = (
    "{Name} began {his} career as {occupation_a} in {place}.",
    "The career of {Name} took shape in {place}, where {he} worked as {occupation_a}.",
)
# ------------------------------------------------------------------------------ organisations

# (industry, name suffix, products, earliest year)
INDUSTRIES = (
    ("shipbuilding", "Shipyards", "cargo ships and ferries", 1650),
    ("textile", "Textiles", "wool and linen fabrics", 1650),
    ("mining", "Mining", "copper and tin", 1650),
    ("brewing", "Breweries", "pale ales and dark lagers", 1650),
    ("glassmaking", "Glassworks", "bottles and window glass", 1650),
    ("porcelain", "Porcelain", "tableware and figurines", 1700),
    ("insurance", "Assurance", "marine and fire insurance", 1700),
    ("banking", "Bank", "savings accounts and commercial loans", 1700),
    ("confectionery", "Confections", "chocolate and boiled sweets", 1750),
    ("chemical", "Chemicals", "dyes and fertilisers", 1820),
    ("railway engineering", "Locomotive Works", "steam and diesel locomotives", 1825),
    ("electrical", "Electric", "lamps, cables and generators", 1870),
    ("automotive", "Motors", "trucks and small cars", 1890),
    ("software", "Systems", "accounting and logistics software", 1960),
)
NEWSPAPER_TITLES = ("Herald", "Gazette", "Courier", "Chronicle", "Tribune", "Observer")
BAND_PATTERNS = ("The {core} Quartet", "{core} Collective", "The {core} Band", "{core} Sound")
CLUB_PATTERNS = ("{core} Athletic", "{core} Rovers", "FC {core}", "{core} Wanderers")
GENRES = ("jazz", "folk", "rock", "brass", "blues", "pop")
SPORTS = ("football", "rugby", "hockey", "basketball", "handball")

COMPANY_FILLERS = (
    "Today it is best known for its {products}.",
    "{Org} employs about {size} people.",
    "The firm has remained in the hands of a small group of shareholders for most of its history.",
    "Its products are sold in many neighbouring markets.",
    "The company is organised in three divisions, each with its own management board.",
    "It issues an annual report and holds its shareholder meetings each spring.",
    "Its workshops and offices occupy a large site near the railway station.",
)
UNIVERSITY_FILLERS = (
    "It has about {size} students and is known for its faculties of {subject} and {subject2}.",
    "Its library is one of the largest in the region.",
    "{Org} admits students from many countries and teaches in several languages.",
    "Its main building is known for its wide staircase and painted ceilings.",
    "The university runs a botanical garden and a small observatory.",
    "Its graduates include many civil servants, physicians and teachers.",
)
NEWSPAPER_FILLERS = (
    "The paper sells about {size} copies per issue.",
    "{Org} is known for its long reports on {topic}.",
    "Its weekend edition carries essays, crossword puzzles and a large section on local sport.",
    "Over the years its editorial line has moved from cautious conservatism to a more liberal outlook.",
    "Several well-known writers began their careers as reporters on its staff.",
    "The paper also runs a popular online edition with a large archive of past issues.",
)
BAND_FILLERS = (
    "The group has released {albums} studio albums.",
    "{Org} is known for its energetic live shows and songs about {song}.",
    "Its line-up has changed several times over the years.",
    "Its debut album was recorded in a single week in a converted warehouse.",
    "The group tours widely and has played at many summer festivals.",
    "Critics have praised its tight rhythm section and warm vocal harmonies.",
)
SONG_TOPICS = ("the sea", "lost love", "night trains", "small towns", "winter roads", "old friends")
CLUB_FILLERS = (
    "The club has won the national championship {titles} times.",
    "{Org} plays its home matches in a stadium that holds about {size} spectators.",
    "Its supporters are known for their songs and their blue and white scarves.",
    "The club also runs a youth academy that has produced several national team players.",
    "Its fiercest rivalry is with a club from a neighbouring town.",
    "The club colours have been green and gold since its earliest seasons.",
)
HISTORY = {
    "company": (
        "In its early years {Org} was a small workshop with only a handful of employees.",
        (
            "{Founder} remained in charge of the company until {until}.",
            "During the {decade}s the firm went through a period of rapid growth.",
            "In {later} it opened a branch in {place}, far from its home region.",
            "A fire in {later2} destroyed part of its premises, which were rebuilt within two years.",
            "Its early success rested on a reputation for reliable goods and fair prices.",
            "Like many firms of its kind, it had to cut its workforce during years of economic crisis.",
            "Its archives, including letters and ledgers from the early decades, are open to researchers.",
        ),
    ),
    "university": (
        "{Org} began with a few dozen students and a single lecture hall.",
        (
            "{Founder} remained its rector until {until}.",
            "During the {decade}s the university added faculties of {subject} and {subject2}.",
            "In {later} it opened a second campus in {place}.",
            "A new library building was completed in {later2}.",
            "Its early teachers came mostly from older academies in neighbouring regions.",
            "Student numbers grew steadily, and new halls of residence were built to house them.",
            "Women were admitted as students within a few decades of its opening.",
        ),
    ),
}
# ------------------------------------------------------------------------------ places

ORIGINS = ("a fishing village", "a river crossing", "a trading post", "a hilltop fortress",
           "a monastery estate", "a market village", "a mining camp")
FEATURES = ("its covered market", "its old stone bridge", "its botanical garden", "its clock tower",
            "its narrow medieval streets", "its harbour front", "its annual lantern festival",
            "its painted wooden houses")
ECONOMIES = ("trade and shipping", "textile mills", "tourism", "farming and food processing",
             "light industry", "fishing", "timber and paper", "wine growing")
CITY_FILLERS = (
    "The local economy relies on {economy}.",
    "The town hall dates from the {century} century.",
    "Its main square is lined with merchant houses and small cafes.",
    "A weekly market has been held there since the Middle Ages.",
)
CAPITAL_HISTORY = (
    "The historic centre is known for {feature}.",
    "Much of the old town was rebuilt in the {century} century after a great fire.",
    "The parliament building stands on the main square.",
    "Besides government services, the local economy relies on {economy}.",
    "The national library and several museums are in the old quarter.",
    "Broad avenues laid out in the {century2} century connect the old town with the newer districts.",
    "A tramway network serves the centre and the suburbs along the river.",
)
COUNTRY_FILLERS = (
    "The economy of {Country} relies on {economy}.",
    "Its climate ranges from mild on the coast to cold in the highlands.",
    "Most of its people live in the river valleys and along the coast.",
    "Its highlands are covered with pine forests and mountain pastures.",
)
COUNTRY_HISTORY = (
    "For several centuries its territory was divided among rival principalities.",
    "It is a parliamentary republic with a legislature of {seats} members.",
    "The national flag was adopted in {flag}.",
    "Its constitution guarantees freedom of worship and of the press.",
    "The early years of the new state were marked by disputes over borders and trade.",
    "A new constitution, adopted a generation later, strengthened the powers of the legislature.",
    "Voting rights were extended to all adult citizens in {suffrage}.",
)
