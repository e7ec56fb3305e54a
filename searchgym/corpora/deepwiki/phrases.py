"""Words and sentence templates of the deepwiki articles.

Filler templates name nobody and state nothing a question asks about: they speak of their
entity through pronouns (``{S}``/``{s}`` subject, ``{o}`` object, ``{P}``/``{p}``
possessive: "He", "him", "The city", "its"...) and draw the
rest from the word lists below. So however often a filler sentence repeats across the
corpus, it never tells two entities apart and never contradicts a fact.

Fact templates (``FACTS``) always name their entity in full, so each fact sentence occurs
once in the corpus: in its entity's article.
"""

from __future__ import annotations

__all__ = [
    "BOOK_TOPICS", "FACTS", "FILLER", "FOUNDER_OCCUPATIONS", "HEADINGS", "INDUSTRIES", "LEADS", "OCCUPATIONS", "SLOTS",
    "UNIVERSITY_PATTERNS",
]

OCCUPATIONS = ("painter", "poet", "novelist", "composer", "architect", "physician", "astronomer", "mathematician",
               "botanist", "chemist", "historian", "philosopher", "sculptor", "cartographer", "engineer", "lawyer",
               "actor", "photographer", "geologist", "surveyor", "diplomat", "economist", "librarian", "translator")
FOUNDER_OCCUPATIONS = ("banker", "merchant", "shipowner", "bishop", "physician", "industrialist", "landowner",
                       "printer", "jurist", "brewer", "wool trader", "astronomer", "glassmaker", "goldsmith")
BOOK_TOPICS = ("river trade", "glass making", "the salt roads", "coastal fortifications", "medieval guilds",
               "tidal mills", "the grain markets", "early printing", "mountain botany", "comets", "the wool trade",
               "harbour engineering", "folk songs", "church bells", "canal building", "the calendar", "mineral springs",
               "rural schools", "the post roads", "bridge design", "weather records", "old coinage", "bee keeping",
               "lighthouses", "the silk trade", "ancient maps", "land reform", "public hospitals", "street lighting",
               "the timber trade", "vineyards", "archive keeping", "sea charts", "the copper mines", "theatre lighting",
               "frontier law", "orchard grafting", "marsh drainage", "the paper mills", "ice harvesting",
               "town planning", "textile dyes", "the fishing fleets", "hill forts", "clock making", "ferry routes",
               "lowland dialects", "tanneries", "the herring trade", "observatories")
INDUSTRIES = ("Shipyards", "Ironworks", "Trading Company", "Mills", "Brewery", "Glassworks", "Printing House",
              "Rope Works", "Foundry", "Mining Company", "Porcelain Works", "Textiles")
UNIVERSITY_PATTERNS = ("University of {core}", "{core} University", "{core} College", "{core} Academy")

#: Word lists the filler templates draw from (``{adj}``, ``{topic}``...).
SLOTS: dict[str, tuple[str, ...]] = {
    "adj": ("modest", "lasting", "considerable", "uneven", "quiet", "remarkable", "steady", "curious", "durable",
            "disputed", "wide", "singular", "gradual", "marked", "unexpected", "lively"),
    "topic": BOOK_TOPICS,
    "group": ("local historians", "later biographers", "contemporary critics", "regional newspapers",
              "visiting scholars", "the older residents", "foreign travellers", "several archivists",
              "modern commentators", "a number of reviewers", "the provincial press", "school textbooks"),
    "thing": ("letters", "notebooks", "account books", "drawings", "surveys", "sketches", "reports", "ledgers",
              "diaries", "pamphlets", "lecture notes", "photographs", "maps", "inventories"),
    "time": ("In those years", "At about this time", "Over the following decade", "For a while", "Later on",
             "In the same period", "Soon afterwards", "During a long winter", "Before long", "In time",
             "Some years later", "Throughout this period"),
    "feeling": ("admiration", "suspicion", "affection", "curiosity", "impatience", "respect", "amusement",
                "indifference", "gratitude", "unease"),
    "place": ("the harbour", "the old quarter", "the market square", "the river bank", "the upper town",
              "the northern suburbs", "the cathedral close", "the railway district", "the western gate",
              "the hills above the town", "the lower town", "the former customs house"),
    "count": ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "a dozen", "several", "many"),
    "season": ("spring", "summer", "autumn", "winter"),
    "quality": ("care", "patience", "precision", "energy", "caution", "ambition", "humour", "discipline",
                "thoroughness", "persistence"),
}

# Templates shared by every kind of entity (pronouns as the module docstring says).
_GENERAL = (
    "{S} has been the subject of {count} studies, most of them written by {group}.",
    "The surviving {thing} give a {adj} picture of {p} affairs in this period.",
    "Opinions about {o} have changed more than once, and {group} still disagree about the details.",
    "{time}, {group} began to take a closer interest in {o}.",
    "Much of what is known comes from {thing} that were kept for decades without being catalogued.",
    "{group} have described {p} influence as {adj} but real.",
    "A collection of {thing} relating to {o} was assembled by {group} and later catalogued.",
    "The record is thin in places, and {count} gaps remain in the surviving {thing}.",
    "Accounts written at the time speak of {o} with a mixture of {feeling} and {feeling2}.",
    "{S} is mentioned in passing in {count} travel accounts of the period.",
    "The details of this episode were long disputed, and the surviving {thing} do not settle the question.",
    "{time}, interest in {o} faded, only to return a generation later.",
    "Several of the {thing} were damaged by damp and are now difficult to read.",
    "The question of {p} reputation was taken up again by {group}, who found the earlier accounts too generous.",
    "It is often said that {s} owed much to chance, though {group} have questioned this view.",
    "An exhibition devoted to {o} drew a {adj} audience, many of them from outside the region.",
)

_PERSON = (
    "{S} was known among friends for {p} {quality} and {p} {quality2}.",
    "{time}, {s} travelled widely and kept {thing} of everything {s} saw.",
    "{S} wrote long letters to friends, many of them about {topic}.",
    "{S} took a {adj} interest in {topic}, which {s} pursued in {p} spare hours.",
    "Colleagues remembered {o} as a person of {quality} who rarely spoke in public.",
    "{time}, {s} lived in rented rooms near {place} and worked late into the night.",
    "{S} spent the {season} months in the countryside, away from the noise of the town.",
    "{P} health was uncertain, and {s} was often forced to rest for weeks at a time.",
    "{S} gave {count} public lectures, which were reported at some length by {group}.",
    "A portrait of {o} painted in middle age shows a person of evident {quality}.",
    "{S} kept a small library, which {s} added to whenever money allowed.",
    "{S} was a regular visitor to the reading rooms near {place}.",
    "{time}, {s} quarrelled with an old friend over a matter that neither would later discuss.",
    "{S} never fully trusted the judgement of {group}.",
    "{P} daily routine, as recorded in {p} {thing}, hardly changed over the years.",
    "{S} declined {count} offers of public office, preferring to keep {p} independence.",
    "{time}, {s} received visitors at home most evenings.",
    "{S} disliked travelling by sea and avoided it whenever possible.",
    "{S} often said that {p} best work was done in the {season}.",
    "{P} handwriting was notoriously hard to read, which has slowed the study of {p} {thing}.",
    "Friends recalled that {s} could talk for hours about {topic}.",
    "{S} left {count} unfinished projects, among them a study of {topic}.",
)

_CITY = (
    "{S} grew slowly at first, spreading outwards from {place}.",
    "The streets around {place} keep much of their old layout.",
    "{time}, {s} was struck by a fire that destroyed {count} streets near {place}.",
    "Markets have been held near {place} for as long as records exist.",
    "{S} has a {adj} tradition of craft workshops, several of them devoted to {topic}.",
    "The {season} fair draws visitors from the surrounding villages.",
    "{time}, the town walls near {place} were taken down to make room for new houses.",
    "{P} population rose and fell with the fortunes of its trade.",
    "The climate is mild, though the {season} can bring heavy rain.",
    "{S} is divided into {count} districts, each with its own parish church.",
    "A tramway once connected {place} with the outlying districts.",
    "{P} museums hold collections of {thing} and old tools.",
    "{time}, new bridges and roads changed the shape of {s}.",
    "Many of the older houses near {place} were restored after a long period of neglect.",
    "{S} has twinning arrangements with {count} towns abroad.",
    "Local festivals are held in the {season}, when the streets near {place} are closed to traffic.",
    "The municipal archive keeps {thing} going back several centuries.",
    "{S} was long known for its bakeries and its covered markets.",
)

_ORG = (
    "{S} grew steadily, though not without setbacks.",
    "{time}, {s} moved part of its work to new premises near {place}.",
    "{P} early records consist mainly of {thing} and correspondence.",
    "{S} was reorganised {count} times over the course of its history.",
    "{time}, {s} faced financial difficulties that nearly closed it.",
    "{P} governing board met every {season} to review its accounts.",
    "{S} has long kept close ties with {group}.",
    "The buildings of {s} have been altered and extended many times.",
    "{time}, {s} began to publish an annual report.",
    "{P} archive holds {thing} going back to its first years.",
    "{S} took a {adj} interest in {topic} and sponsored work on the subject.",
    "Staff of {s} were known for their {quality}.",
    "{time}, {s} opened a small branch near {place}.",
    "{S} weathered a long dispute with the town council over land near {place}.",
)

_UNIVERSITY = (
    "{S} offers courses in law, medicine and the natural sciences.",
    "The library of {s} holds a {adj} collection of works on {topic}.",
    "Students of {s} have long kept up a rivalry with those of neighbouring colleges.",
    "{time}, {s} opened a new faculty devoted to {topic}.",
    "Lectures at {s} were given in the old hall near {place} until new buildings were finished.",
    "{S} admits a few hundred new students every {season}.",
)

_COMPANY = (
    "{S} sold much of its output abroad.",
    "The workforce of {s} rose to several hundred at its height.",
    "{time}, {s} introduced new machinery that doubled its output.",
    "{S} built housing for its workers near {place}.",
    "{P} products were shown at {count} trade exhibitions.",
    "{time}, {s} bought out a smaller rival.",
)

FILLER: dict[str, tuple[str, ...]] = {
    "person": _GENERAL + _PERSON,
    "city": _GENERAL + _CITY,
    "university": _GENERAL + _ORG + _UNIVERSITY,
    "company": _GENERAL + _ORG + _COMPANY,
}

#: Section headings per kind of article; more than an article of 10,000 words needs.
HEADINGS: dict[str, tuple[str, ...]] = {
    "person": ("Background", "Early years", "Education", "Career", "Travels", "Works", "Personal life",
               "Later life", "Correspondence", "Reception", "Legacy", "Character", "Public life", "Interests",
               "Friendships", "Archives", "Portraits", "Assessment", "Influence", "Disputes"),
    "city": ("Overview", "Geography", "History", "Economy", "Culture", "Architecture", "Districts", "Transport",
             "Climate", "Demographics", "Education", "Religion", "Festivals", "Landmarks", "Government",
             "Archives", "Sport", "Media", "Notable buildings", "Surroundings"),
    "university": ("Overview", "History", "Organisation", "Campus", "Library", "Faculties", "Student life",
                   "Finances", "Research", "Governance", "Archives", "Buildings", "Traditions", "Reputation",
                   "Alumni", "Publications", "Rankings", "Expansion", "Reforms", "Collections"),
    "company": ("Overview", "History", "Products", "Operations", "Ownership", "Workforce", "Premises",
                "Finances", "Exports", "Labour relations", "Archives", "Expansion", "Decline", "Reputation",
                "Management", "Trade", "Innovation", "Disputes", "Legacy", "Collections"),
}

#: Lead sentences: they name the entity but state no fact a question asks about.
LEADS: dict[str, tuple[str, ...]] = {
    "person": ("{name} is remembered as one of the more {adj} figures of {p} generation.",
               "The life of {name} is documented in {thing} now held by {group}.",
               "{name} attracted {feeling} from contemporaries and {feeling2} from {group}.",
               "This article describes the life and work of {name}."),
    "city": ("{name} is a city in {country}.",
             "{name} is known for its {adj} history and the streets around {place}.",
             "This article describes the city of {name}, its history and its present."),
    "university": ("{name} is a university.",
                   "{name} has been described by {group} as a {adj} institution.",
                   "This article describes {the_name}, its history and its organisation."),
    "company": ("{name} is a company.",
                "{name} has been described by {group} as a {adj} enterprise.",
                "This article describes {name}, its history and its products."),
}

#: Fact templates per (kind, fact): each names its entity in full ({name}, or {The_name} at
#: the start of a sentence for "the University of ..."); the variant is drawn per entity.
FACTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("person", "birth_year"): ("{name} was born in {value}.", "{name} was born in the year {value}."),
    ("person", "occupation"): ("{name} worked as {value}.", "By profession {name} was {value}."),
    ("person", "book"): ("In {year}, {name} published a book on {topic}.", "{name} published a book on {topic} in {year}."),
    ("person", "birthplace"): ("{name} was born in {value}.", "The birthplace of {name} was {value}."),
    ("person", "university"): ("{name} studied at {value}.", "{name} was educated at {value}."),
    ("person", "employer"): ("{name} worked for {value}.", "For most of {p} career {name} was employed by {value}."),
    ("person", "mentor"): ("{name} was a pupil of {value}.", "{name} studied under {value}."),
    ("city", "settled"): ("{name} was first settled in {value}.", "The first settlement at {name} dates from {value}."),
    ("city", "river"): ("{name} lies on the river {value}.", "The river {value} flows through {name}."),
    ("university", "founded"): ("{The_name} was founded in {value}.", "{The_name} opened its doors in {value}."),
    ("university", "founder"): ("The founder of {the_name} was {value}.", "{The_name} was founded by {value}."),
    ("university", "city"): ("{The_name} is based in {value}.", "The main buildings of {the_name} stand in {value}."),
    ("company", "founded"): ("{name} was founded in {value}.", "{name} began trading in {value}."),
    ("company", "hq"): ("{name} is headquartered in {value}.", "The headquarters of {name} are in {value}."),
}
