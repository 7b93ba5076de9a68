"""Build examples/hard_conversations.jsonl: a hard, multi-session evidence-retention set.

Each conversation has 2 to 4 speakers, 18 to 34 dated sessions and about 600 turns. Facts
about each speaker are spread over the sessions: a statement, often a detail given in the
next turn in reply to a question (so the detail shares no word with the question), and a
follow-up several sessions later. Around them: small talk built from templates, with
distractors that reuse the facts' vocabulary (other people's dogs, jobs, trips, classes).
Names, cities, companies and jobs come from Faker's locale data, seeded per conversation.

Question kinds (DESIGN.md section 8 `category`):
  single_hop   one fact, mostly in one turn, the question shares some words with it;
  temporal     when something happened (the session date answers it), or what someone
               mentioned in a given month (only the time window tells the turns apart);
  multi_hop    evidence in two or more turns, usually sessions far apart: a chain
               (statement -> name -> follow-up), an aggregate (every trip, every hobby), or
               two speakers sharing something;
  open_domain  paraphrased: the question's words differ from the evidence's;
  adversarial  asks about the wrong speaker (something that person never said); the evidence
               is the turn where the other speaker said it.

Run `python tests/make_hard_conversations.py --out examples/hard_conversations.jsonl` to
rebuild it. The output depends only on the seeds and the Faker version
(tests/test_hard_eval.py checks the shipped file when the Faker version matches).
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from faker import Faker

sys.path.insert(0, str(Path(__file__).parent))
import jsonl_out  # noqa: E402  (the generators' shared --out handling)

FAKER_VERSION = "40.63.0"
# (seed, speakers, sessions): several seeds and conversation shapes, so that no ranking
# change is tuned to one sample.
SHAPES = ((1, 2, 19), (2, 3, 24), (3, 4, 30), (4, 2, 32), (5, 3, 20), (6, 4, 34),
          (7, 2, 26), (8, 3, 28))
TURNS_PER_CONVERSATION = 600
NAME_LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "pt_BR", "nl_NL",
                "pl_PL", "sv_SE", "en_IN", "en_IE")
# it_IT is left out of the cities: its city() is not reproducible across processes.
CITY_LOCALES = ("de_DE", "es_ES", "pl_PL", "sv_SE", "en_IN", "fr_FR", "nl_NL",
                "pt_PT", "da_DK", "cs_CZ")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")

# Relative time phrases in statements, with how many days before the session they point to.
AGO = (("yesterday", 1), ("last weekend", 6), ("two days ago", 2), ("this morning", 0),
       ("last Friday", 4), ("a week ago", 7), ("on Sunday", 3))

# -- small talk -------------------------------------------------------------------------------
FILLER = (
    "{weekday} was {adj}, I spent most of it {activity}.",
    "I had lunch with {name} from work, we talked about {chat} for an hour.",
    "The {appliance} in my flat broke again, the landlord says someone will come next week.",
    "Have you seen the new {genre} series? Everyone at work is obsessed with it.",
    "It rained all day, so I stayed in with a {drink} and a blanket.",
    "My {relative} called, she wants everyone to come over for {holiday}.",
    "My neighbour's {animal} barked all night again, I barely slept.",
    "A friend of mine works as a {job}, it sounds exhausting.",
    "{name} from my old job moved to {city} last year and keeps sending photos.",
    "I almost signed up for a {hobby} class, but I chickened out at the last minute.",
    "The {race} in town closed half the roads on Sunday.",
    "I found a great little place that does {food}, we should go sometime.",
    "Work has been {adj}, three deadlines in one week.",
    "I keep meaning to clean the {room}, maybe this weekend.",
    "Did you hear that {name} is thinking about a trip to {city}?",
    "My phone is on its last legs, the battery dies by lunchtime.",
    "We had a team meeting about {chat} and nobody agreed on anything.",
    "I tried cooking {food} at home, it was edible at least.",
    "The train was late again, I stood on the platform for forty minutes.",
    "I watched a documentary about {chat} last night, surprisingly good.",
    "There's a {hobby} club near the station, I walk past it every day.",
    "My cousin bought a {vehicle} and won't stop talking about it.",
    "I've been sleeping badly, too much coffee probably.",
    "The weather is so {adj} lately, I don't know what to wear.",
    "We ordered {food} on Friday because nobody wanted to cook.",
    "Someone at the gym recommended a book by {name}, I might look for it.",
    "I spent {weekday} helping {name} carry boxes up four flights of stairs.",
    "A colleague broke her wrist skiing, so the whole office is signing her cast.",
    "The {place} down the road is looking for volunteers, there's a poster in the window.",
    "I went to the market and came back with far too many {produce}.",
    "My {relative} is learning the {instrument}, the whole house can hear it.",
    "The concert in the park was cancelled because of the wind.",
    "I finally replied to all my emails, it took the whole evening.",
    "Our building is getting new windows, so there's drilling every morning.",
    "I ran into {name} at the supermarket, we hadn't talked in years.",
)
REPLIES = (
    "Ha, that sounds about right.", "Oh no, that's annoying.", "That sounds lovely, honestly.",
    "I know exactly what you mean.", "Same here, it's been one of those weeks.",
    "That made me laugh.", "You should tell me more about that sometime.",
    "I would have done the same thing.", "Fair enough.", "Wow, I didn't expect that.",
    "Oh really? How come?", "Sounds like a lot.", "Haha, classic.", "I'm so jealous.",
    "That's a relief.", "Hope it gets better soon.", "Good for you!", "Wait, seriously?",
)
# --specific-filler: small talk that names people, places and firms as often as the facts
# do, so "turns with rare words are the facts" stops being true (a robustness check).
SPECIFIC_TAILS = (
    "{name} said the same thing about {city}.", "It reminded me of that time in {city}.",
    "Anyway, {name} sends her regards.", "{name} from {company} told me about it first.",
    "Apparently {name} has a theory: {phrase}.", "My cousin in {city} laughed at that.",
)
SLOTS = {
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "adj": ("exhausting", "strange", "quiet", "hectic", "grey", "lovely", "chaotic", "slow"),
    "activity": ("doing laundry", "answering emails", "reorganising my wardrobe",
                 "fixing the bike", "baking bread", "watching old films", "repotting plants",
                 "sorting out taxes"),
    "chat": ("the budget", "the new office layout", "electric cars", "octopuses",
             "the history of tea", "remote work", "a merger rumour", "climate policy"),
    "appliance": ("washing machine", "boiler", "fridge", "dishwasher", "oven", "shower"),
    "genre": ("detective", "cooking", "sci-fi", "historical", "reality", "nature"),
    "drink": ("pot of tea", "hot chocolate", "glass of wine", "mug of coffee"),
    "relative": ("mum", "aunt", "grandmother", "sister-in-law", "godmother"),
    "holiday": ("her birthday", "the long weekend", "the summer barbecue", "New Year"),
    "animal": ("dog", "beagle", "puppy", "terrier", "husky"),
    "hobby": ("pottery", "salsa", "chess", "yoga", "climbing", "painting", "photography"),
    "race": ("half marathon", "10k run", "charity cycle ride", "marathon"),
    "food": ("ramen", "tacos", "dumplings", "pho", "curry", "falafel", "paella"),
    "room": ("garage", "attic", "balcony", "kitchen cupboards", "spare room"),
    "vehicle": ("camper van", "motorbike", "electric scooter", "vintage car"),
    "place": ("food bank", "library", "animal shelter", "community garden"),
    "produce": ("tomatoes", "apples", "courgettes", "plums", "peppers"),
    "instrument": ("trumpet", "violin", "drums", "saxophone"),
}


# -- facts: statement, prompted detail, follow-up, and the questions they answer -------------
@dataclass(frozen=True)
class Topic:
    key: str
    say: tuple[str, ...]
    prompt: tuple[str, ...] = ()
    detail: tuple[str, ...] = ()
    later: tuple[str, ...] = ()
    # (category, question, answer, evidence keys among "say", "detail", "later")
    questions: tuple[tuple[str, str, str, tuple[str, ...]], ...] = ()
    repeatable: bool = False


TOPICS = (
    Topic("pet",
          say=("Big news: {ago} I adopted a rescue {pet_kind} from the shelter in {town}.",
               "We finally brought home a {pet_kind} {ago}, a rescue from a shelter in {town}.",
               "Our family grew {ago}: a little {pet_kind} from the {town} rescue centre."),
          prompt=("No way! What did you name it?", "That's lovely, does it have a name yet?"),
          detail=("We call her {pet}, it just suited her.",
                  "{pet}. The kids picked it and it stuck."),
          later=("{pet} had to see the vet {ago}, she hurt a paw chasing a squirrel.",
                 "Took {pet} to obedience school {ago} and she was the worst student there."),
          questions=(
              ("single_hop", "What is the name of the {pet_kind} {p} adopted?", "{pet}",
               ("say", "detail")),
              ("temporal", "When did {p} adopt the {pet_kind}?", "{when_say}", ("say",)),
              ("open_domain", "Does {p} have any animals living at home?",
               "Yes, a {pet_kind} called {pet}", ("say",)),
              ("multi_hop", "What happened later to the animal {p} rescued?", "{later_gist}",
               ("say", "detail", "later")),
              ("adversarial", "What is the name of {o}'s {pet_kind}?",
               "Not mentioned; it was {p} who adopted {pet}", ("say", "detail")))),
    Topic("job",
          say=("I got the offer {ago}! I'm starting as a {job} at {company} next month.",
               "{ago_cap} I signed the contract, so I'll be working as a {job} for {company}."),
          prompt=("Congrats! Will you have to commute?", "Amazing, where is the office?"),
          detail=("The office is in {city}, so it's the early train for me.",
                  "It's based in {city}, about forty minutes away by bus."),
          later=("First month at {company} done, my manager put me on the big client project.",
                 "Work at {company} is intense, I stayed until nine {ago}."),
          questions=(
              ("single_hop", "Which company hired {p}?", "{company}", ("say",)),
              ("temporal", "When did {p} accept the new job offer?", "{when_say}", ("say",)),
              ("open_domain", "What does {p} do for a living now?", "{job}", ("say",)),
              ("multi_hop", "Where does {p} commute to for the new role, and how is it going?",
               "{city}; {later_gist}", ("detail", "later")),
              ("adversarial", "Which company hired {o}?", "Not mentioned; {p} joined {company}",
               ("say",)))),
    Topic("move",
          say=("We're moving to {city} at the end of the month, the boxes are everywhere.",
               "{ago_cap} we signed the lease on a flat in {city}."),
          prompt=("Big change! Why {city}?", "What made you pick {city}?"),
          detail=("My partner's family lives there and rents are lower than here.",
                  "Mostly the schools, and the flat has a balcony facing the river."),
          later=("Still not used to {street}, the trams start at five in the morning.",
                 "Our new neighbours on {street} brought us a cake, so kind."),
          questions=(
              ("single_hop", "Which city is {p} moving to?", "{city}", ("say",)),
              ("open_domain", "What were {p}'s reasons for relocating?", "{detail_gist}",
               ("detail",)),
              ("temporal", "When did {p} decide to move to {city}?", "{when_say}", ("say",)),
              ("multi_hop", "On which street does {p} live after the move, and in which city?",
               "{street}, {city}", ("say", "later")),
              ("adversarial", "Why is {o} moving to {city}?",
               "{o} is not; {p} is, because: {detail_gist}", ("say", "detail")))),
    Topic("hobby", repeatable=True,
          say=("{ago_cap} I went to my first {hobby} class, I'm hooked.",
               "I've taken up {hobby}, the club meets on Thursdays.",
               "Guess who tried {hobby} {ago}? Me. Sore everywhere, but it was fun."),
          prompt=("How did you get into that?", "Is it hard?", "Who runs it?"),
          detail=("The teacher, {teacher}, is so patient with beginners.",
                  "A colleague dragged me along, {teacher} runs the sessions."),
          questions=(
              ("single_hop", "Who teaches the {hobby} sessions {p} goes to?", "{teacher}",
               ("say", "detail")),
              ("window", "Which new activity did {p} mention in {month_year}?", "{hobby}",
               ("say",)),
              ("adversarial", "Who teaches {o}'s {hobby} class?",
               "{o} takes no such class; {p}'s teacher is {teacher}", ("say", "detail")))),
    Topic("trip", repeatable=True,
          say=("Just got back from {city}, we left {ago} and the old town was gorgeous.",
               "{ago_cap} we flew to {city} for a long weekend.",
               "Spent a few days in {city}, came home {ago}."),
          prompt=("Jealous! What was the highlight?", "Ooh, what did you eat?"),
          detail=("A boat tour at sunset, and the best {dish} I have ever had.",
                  "Honestly the {dish} at a tiny place near the station."),
          questions=(
              ("single_hop", "What was the best thing {p} ate in {city}?", "{dish}",
               ("say", "detail")),
              ("temporal", "When did {p} come back from {city}?", "{when_say}", ("say",)),
              ("adversarial", "What did {o} eat in {city}?",
               "{o} did not go; {p} had {dish}", ("say", "detail")))),
    Topic("wedding",
          say=("My {rel} {sib} is getting married in {month}! I'm giving a speech.",
               "{sib}, my {rel}, got engaged and the wedding is in {month}, I'm in charge "
               "of the speech."),
          later=("The wedding was perfect, {sib} cried through my whole speech.",
                 "{sib}'s big day went well, though I forgot half my speech."),
          questions=(
              ("single_hop", "Who is getting married in {p}'s family?", "{rel} {sib}",
               ("say",)),
              ("temporal", "In which month is the wedding of {p}'s {rel}?", "{month}",
               ("say",)),
              ("multi_hop", "How did the speech {p} prepared for the family celebration go?",
               "{later_gist}", ("say", "later")),
              ("open_domain", "What part does {p} play in the upcoming family ceremony?",
               "Giving the speech", ("say",)),
              ("adversarial", "Who is getting married in {o}'s family?",
               "Not mentioned; {p}'s {rel} {sib} is", ("say",)))),
    Topic("injury",
          say=("{ago_cap} I {injury} playing {sport}, so I'm out for a while.",
               "I {injury} during a {sport} match {ago}, it's swollen like a melon."),
          later=("The physio says I can go back to {sport} in two weeks, finally.",
                 "Back on the {sport} court {ago}, took it easy though."),
          questions=(
              ("single_hop", "How did {p} get hurt?", "{injury} playing {sport}", ("say",)),
              ("temporal", "When did {p} get injured playing {sport}?", "{when_say}",
               ("say",)),
              ("multi_hop", "Has {p} recovered enough to return after the injury?",
               "{later_gist}", ("say", "later")),
              ("open_domain", "Why was {p} sidelined for a while?", "{injury}", ("say",)),
              ("adversarial", "How did {o} get hurt playing {sport}?",
               "{o} did not; {p} {injury}", ("say",)))),
    Topic("race",
          say=("I signed up for a {distance} to raise money for {cause}.",
               "{ago_cap} I registered for the {distance}, all the money goes to {cause}."),
          later=("Finished the {distance} in {duration}! We raised {amount} for {cause}.",
                 "Crossed the line {ago} in {duration}, and the fundraising hit {amount}."),
          questions=(
              ("single_hop", "Which cause is {p}'s {distance} for?", "{cause}", ("say",)),
              ("multi_hop", "How long did the charity run take {p}, and for which cause?",
               "{duration}, for {cause}", ("say", "later")),
              ("temporal", "When did {p} sign up for the {distance}?", "{when_say}",
               ("say",)),
              ("open_domain", "Does {p} do anything for good causes?",
               "Runs a {distance} for {cause}", ("say",)),
              ("adversarial", "How long did {o} take to finish the {distance}?",
               "{o} did not run it; {p} took {duration}", ("later",)))),
    Topic("book",
          say=("I'm halfway through '{title}' by {author}, I can't put it down.",
               "Started '{title}' {ago}, a friend swore {author} is a genius."),
          prompt=("What's it about?", "Is it any good?"),
          detail=("{plot}, and the ending keeps changing my mind.",
                  "{plot}. Slow start, brilliant middle, I'm told."),
          questions=(
              ("single_hop", "Who wrote the book {p} is reading?", "{author}", ("say",)),
              ("open_domain", "What kind of story is {p} into lately?", "{plot_lower}",
               ("say", "detail")),
              ("adversarial", "Which novel is {o} reading at the moment?",
               "Not mentioned; {p} is reading '{title}'", ("say",)))),
    Topic("vehicle",
          say=("I finally bought a {colour} {vehicle} {ago}, paid {price} for it.",
               "Treated myself to a second-hand {colour} {vehicle}, {price}, {ago}."),
          later=("My new wheels left me stranded on the motorway {ago}, I had to call a "
                 "tow truck.", "The {colour} beauty is in the garage again, the clutch "
                 "went."),
          questions=(
              ("single_hop", "What colour is {p}'s {vehicle}?", "{colour}", ("say",)),
              ("temporal", "When did {p} buy the {vehicle}?", "{when_say}", ("say",)),
              ("multi_hop", "What trouble did {p} have with the thing bought for {price}?",
               "{later_gist}", ("say", "later")),
              ("open_domain", "How does {p} get around these days?",
               "A {colour} {vehicle}", ("say",)),
              ("adversarial", "How much did {o} pay for the {vehicle}?",
               "Not mentioned; {p} paid {price}", ("say",)))),
    Topic("volunteer",
          say=("I've started volunteering at the {place} on {day}s.",
               "Every {day} I help out at the {place} now, since {ago}."),
          prompt=("That's great, what do you do there?",),
          detail=("Mostly sorting donations and chatting with people, it's humbling.",
                  "Stacking shelves, making tea, listening. Best part of my week."),
          questions=(
              ("single_hop", "Where does {p} volunteer?", "At the {place}", ("say",)),
              ("window", "On which day of the week is {p} at the {place}?", "{day}",
               ("say",)),
              ("open_domain", "How does {p} give back to the community?",
               "Helps at the {place} every {day}", ("say", "detail")),
              ("adversarial", "Where does {o} volunteer on {day}s?",
               "Not mentioned; {p} volunteers at the {place}", ("say",)))),
    Topic("instrument",
          say=("I've started {instrument} lessons, my teacher {teacher} is very strict.",
               "{ago_cap} I had my first {instrument} lesson with {teacher}."),
          later=("Played {piece} at the recital {ago}, my hands were shaking.",
                 "The recital went fine, {piece} without a single wrong note."),
          questions=(
              ("single_hop", "Who teaches {p} the {instrument}?", "{teacher}", ("say",)),
              ("multi_hop", "Which piece did {p} perform, and on what instrument?",
               "{piece} on the {instrument}", ("say", "later")),
              ("temporal", "When did {p} begin learning the {instrument}?", "{when_say}",
               ("say",)),
              ("open_domain", "Is {p} musical?", "Yes, learning the {instrument}", ("say",)),
              ("adversarial", "Who is {o}'s {instrument} teacher?",
               "Not mentioned; {p}'s teacher is {teacher}", ("say",)))),
    Topic("allergy",
          say=("Turns out I'm allergic to {allergen}, I found out {ago} after a dinner "
               "went badly.", "{ago_cap} the doctor confirmed it: {allergen} allergy."),
          questions=(
              ("single_hop", "What is {p} allergic to?", "{allergen}", ("say",)),
              ("open_domain", "What should a host avoid serving {p}?", "{allergen}",
               ("say",)),
              ("temporal", "When did {p} learn about the {allergen} allergy?", "{when_say}",
               ("say",)),
              ("adversarial", "What is {o} allergic to?",
               "Not mentioned; {p} is allergic to {allergen}", ("say",)))),
    Topic("concert",
          say=("{ago_cap} I saw {band} live in {city}, they played for three hours.",
               "Went to the {band} gig in {city} {ago}, my ears are still ringing."),
          questions=(
              ("single_hop", "Which band did {p} see live?", "{band}", ("say",)),
              ("temporal", "When did {p} see {band} in {city}?", "{when_say}", ("say",)),
              ("open_domain", "What kind of evening out does {p} enjoy?",
               "Concerts, such as {band} in {city}", ("say",)),
              ("adversarial", "Where did {o} see {band}?",
               "{o} did not; {p} saw them in {city}", ("say",)))),
)
AGGREGATES = {
    "hobby": ("What activities has {p} taken up over these months?", "{all}"),
    "trip": ("Which places has {p} travelled to?", "{all}"),
}
SHARED = ("Which activity do {p} and {q} both do?", "{hobby}")
CATEGORY = {"window": "temporal"}
WEIGHTS = {"single_hop": 1.0, "temporal": 1.2, "window": 1.2, "multi_hop": 3.0,
           "open_domain": 2.5, "adversarial": 0.6}

VALUES = {
    "pet_kind": ("greyhound", "beagle", "border collie", "tabby kitten", "dachshund",
                 "rabbit", "cockatiel", "spaniel"),
    "hobby": ("pottery", "salsa dancing", "bouldering", "chess", "watercolour painting",
              "sourdough baking", "birdwatching", "kayaking", "knitting", "film photography",
              "archery", "beekeeping", "woodcarving", "fencing"),
    "dish": ("seafood risotto", "grilled octopus", "pierogi", "goulash", "cardamom buns",
             "lamb tagine", "pastel de nata", "spinach pie", "smoked eel"),
    "rel": ("sister", "brother", "cousin", "best friend"),
    "injury": ("sprained my ankle", "broke my wrist", "pulled a hamstring",
               "dislocated my shoulder", "cracked a rib"),
    "sport": ("five-a-side football", "volleyball", "tennis", "basketball", "squash",
              "hockey"),
    "distance": ("half marathon", "10k", "marathon", "sprint triathlon", "trail race"),
    "cause": ("the children's hospital", "a cancer charity", "the animal shelter",
              "a mental health charity", "the local hospice"),
    "duration": ("one hour fifty", "fifty-two minutes", "four hours ten", "two hours flat"),
    "amount": ("1,200 euros", "800 pounds", "2,500 dollars", "640 euros"),
    "colour": ("red", "dark green", "yellow", "silver", "sky-blue", "black"),
    "vehicle": ("Vespa", "electric bike", "Volvo estate", "camper van", "Fiat Panda"),
    "price": ("1,900 euros", "3,400 pounds", "700 euros", "12,000 dollars"),
    "place": ("food bank", "hospice", "public library", "community garden",
              "homeless shelter"),
    "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Saturday"),
    "instrument": ("cello", "ukulele", "trumpet", "piano", "drums", "violin", "flute"),
    "piece": ("a Bach minuet", "Clair de Lune", "a Beatles medley", "the Swan",
              "Ode to Joy"),
    "allergen": ("peanuts", "shellfish", "sesame", "kiwi", "hazelnuts"),
    "plot": ("A lighthouse keeper finds letters from the 1920s",
             "Two rival chefs are stuck on an island",
             "A detective investigates her own family",
             "An astronaut comes home to a town that forgot him"),
}


@dataclass
class Fact:
    topic: Topic
    owner: str
    slots: dict[str, str]
    turns: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> (session, pos)
    texts: dict[str, str] = field(default_factory=dict)


def _fill(template: str, slots: dict[str, str]) -> str:
    return template.format(**slots)


class Builder:
    """One conversation, from one seed and shape."""

    def __init__(self, seed: int, n_speakers: int, n_sessions: int,
                 specific_filler: bool = False, session_times: bool = False) -> None:
        self.specific_filler = specific_filler
        self.session_times = session_times
        self.rng = random.Random(f"rms-duck-hard-{seed}")
        # One Faker per locale, each seeded, and the locale picked with our own generator:
        # a multi-locale Faker picks locales with the global `random`, which is not seeded.
        self.fakers = {locale: Faker(locale) for locale in (*NAME_LOCALES, *CITY_LOCALES)}
        for i, locale in enumerate(sorted(self.fakers)):
            self.fakers[locale].seed_instance(seed * 100 + i)
        self.english = self.fakers["en_US"]
        self.seed, self.n_sessions = seed, n_sessions
        names: list[str] = []
        while len(names) < n_speakers:
            name = self.fake.first_name()
            if name not in names and " " not in name and "-" not in name:
                names.append(name)
        self.speakers = names
        start = datetime(2022 + seed % 3, 1 + self.rng.randrange(12), 1 + self.rng.randrange(27),
                         8 + self.rng.randrange(12), self.rng.randrange(60))
        self.dates = []
        for _ in range(n_sessions):
            self.dates.append(start)
            start += timedelta(days=self.rng.choice((3, 5, 7, 9, 12, 16, 21, 28)),
                               hours=self.rng.randrange(-3, 4), minutes=self.rng.randrange(60))

    @property
    def fake(self) -> Faker:
        """A Faker of one of the name locales, picked at random."""
        return self.fakers[self.rng.choice(NAME_LOCALES)]

    def city(self) -> str:
        return self.fakers[self.rng.choice(CITY_LOCALES)].city()

    def slots(self, topic: Topic, owner: str, session: int) -> dict[str, str]:
        r = self.rng
        values = {k: r.choice(v) for k, v in VALUES.items()}
        ago, days = r.choice(AGO)
        values.update(
            p=owner, ago=ago, ago_cap=ago[0].upper() + ago[1:], days=str(days),
            town=self.city(), city=self.city(), street=self.fake.street_name(),
            pet=self.fake.first_name_female(), teacher=self.fake.name(),
            sib=self.fake.first_name(), author=self.fake.name(),
            job=self.english.job().split(",")[0].lower(), company=self.fake.company(),
            month=MONTHS[(self.dates[session].month + r.randrange(1, 5)) % 12],
            title=self.fake.catch_phrase().title(),
            band=r.choice(("{} Brothers", "{} and the Lanterns", "{} Collective",
                           "Velvet {}")).format(self.fake.last_name()))
        values["plot_lower"] = values["plot"][0].lower() + values["plot"][1:]
        when = self.dates[session] - timedelta(days=days)
        values["when_say"] = f"around {when.day} {MONTHS[when.month - 1]} {when.year}"
        values["month_year"] = f"{MONTHS[self.dates[session].month - 1]} " \
                               f"{self.dates[session].year}"
        return values

    def plan(self) -> list[Fact]:
        """Which facts each speaker states, and in which sessions (follow-ups far later)."""
        r, facts = self.rng, []
        per_speaker = max(6, 15 - 2 * len(self.speakers))
        for owner in self.speakers:
            single = [t for t in TOPICS if not t.repeatable]
            chosen = r.sample(single, min(per_speaker, len(single)))
            chosen += [t for t in TOPICS if t.repeatable for _ in range(r.randrange(2, 4))]
            hobbies = r.sample(VALUES["hobby"], 3)
            for topic in chosen:
                session = r.randrange(self.n_sessions - (self.n_sessions // 3 if topic.later
                                                         else 0))
                slots = self.slots(topic, owner, session)
                if topic.key == "hobby":
                    slots["hobby"] = hobbies.pop()
                fact = Fact(topic, owner, slots)
                fact.turns["say"] = (session, -1)
                if topic.later:
                    low = session + max(3, self.n_sessions // 3)
                    fact.turns["later"] = (r.randrange(min(low, self.n_sessions - 1),
                                                       self.n_sessions), -1)
                facts.append(fact)
        return facts

    def build(self) -> dict:
        r = self.rng
        facts = self.plan()
        conv_id = f"hard-{self.seed}-{'-'.join(s.lower() for s in self.speakers)}"
        # Scripted turns per session: (speaker, text, fact, key).
        scripted: list[list[list]] = [[] for _ in range(self.n_sessions)]
        for fact in facts:
            s = fact.slots
            other = r.choice([x for x in self.speakers if x != fact.owner])
            s["o"] = other
            session = fact.turns["say"][0]
            block = [[fact.owner, _fill(r.choice(fact.topic.say), s), fact, "say"]]
            if fact.topic.detail:
                block.append([other, _fill(r.choice(fact.topic.prompt), s), None, None])
                block.append([fact.owner, _fill(r.choice(fact.topic.detail), s), fact,
                              "detail"])
            scripted[session].append(block)
            if fact.topic.later:
                later_slots = dict(s, ago=r.choice(AGO)[0])
                scripted[fact.turns["later"][0]].append(
                    [[fact.owner, _fill(r.choice(fact.topic.later), later_slots), fact,
                      "later"]])
        turns, locations = [], {}
        per_session = TURNS_PER_CONVERSATION // self.n_sessions
        for number in range(self.n_sessions):
            blocks = scripted[number]
            n_turns = per_session + r.randrange(-4, 5)
            people = {b[0][0] for b in blocks} | {t[0] for b in blocks for t in b}
            while len(people) < min(2, len(self.speakers)) or r.random() < 0.3:
                people.add(r.choice(self.speakers))
                if len(people) == len(self.speakers):
                    break
            people_list = sorted(people, key=self.speakers.index)
            free = max(n_turns - sum(len(b) for b in blocks), len(blocks) + 1)
            lines: list[list] = [[None] for _ in range(free)]
            for block in blocks:
                lines.insert(r.randrange(len(lines) + 1), block)
            when = self.dates[number]
            speaker_turn = position = 0
            for item in lines:
                for entry in (item if item[0] is not None else [None]):
                    if entry is None:
                        speaker = people_list[speaker_turn % len(people_list)]
                        text = self.small_talk()
                        fact = key = None
                    else:
                        speaker, text, fact, key = entry
                    speaker_turn += 1
                    when += timedelta(minutes=r.randrange(1, 4))
                    position += 1
                    turn_id = f"S{number + 1}:{position}"
                    stamp = self.dates[number] if self.session_times else when
                    turns.append({"id": turn_id, "session": f"S{number + 1}",
                                  "time": stamp.isoformat() + "Z", "speaker": speaker,
                                  "text": text})
                    if fact is not None:
                        fact.texts[key] = text
                        locations[(id(fact), key)] = turn_id
        return {"conversation_id": conv_id, "turns": turns,
                "questions": self.questions(conv_id, facts, locations)}

    def small_talk(self) -> str:
        r = self.rng
        if r.random() < 0.3:
            return r.choice(REPLIES)
        values = {k: r.choice(v) for k, v in SLOTS.items()}
        values.update(name=self.fake.first_name(), city=self.city(),
                      job=self.english.job().split(",")[0].lower())
        text = r.choice(FILLER).format(**values)
        if self.specific_filler and r.random() < 0.8:
            text += " " + r.choice(SPECIFIC_TAILS).format(
                name=self.fake.first_name(), city=self.city(), company=self.fake.company(),
                phrase=self.english.catch_phrase().lower())
        if r.random() < 0.25:
            text = r.choice(REPLIES) + " " + text
        return text

    def questions(self, conv_id: str, facts: list[Fact], where: dict) -> list[dict]:
        r, out = self.rng, []

        def add(category: str, question: str, answer: str, evidence: list[str]) -> None:
            out.append({"id": f"{conv_id}-q{len(out) + 1}", "question": question,
                        "answer": answer, "category": CATEGORY.get(category, category),
                        "evidence": evidence})

        for fact in facts:
            s = dict(fact.slots)
            s["later_gist"] = fact.texts.get("later", "")
            s["detail_gist"] = fact.texts.get("detail", "")
            options = []
            for category, question, answer, keys in fact.topic.questions:
                if any((id(fact), k) not in where for k in keys):
                    continue
                if category == "temporal" and "{ago" not in _template_of(fact, "say") \
                        and "{when_say}" in answer:
                    continue  # the statement carries no time cue: the date is not answerable
                if category == "window" and sum(
                        1 for f in facts if f.owner == fact.owner
                        and f.topic.key == fact.topic.key
                        and f.slots["month_year"] == s["month_year"]) > 1:
                    continue
                options.append((category, question, answer, keys))
            # Two questions per fact, of different kinds, the rarer kinds more often
            # (weighted sampling without replacement: the largest random() ** (1 / weight)).
            options.sort(key=lambda o: -r.random() ** (1 / WEIGHTS[o[0]]))
            for category, question, answer, keys in options[:2]:
                add(category, _fill(question, s), _fill(answer, s),
                    [where[(id(fact), k)] for k in keys])
        for owner in self.speakers:
            for key, (question, _) in AGGREGATES.items():
                mine = [f for f in facts if f.owner == owner and f.topic.key == key]
                if len(mine) >= 2:
                    things = [f.slots["hobby" if key == "hobby" else "city"] for f in mine]
                    add("multi_hop", question.format(p=owner), ", ".join(things),
                        [where[(id(f), "say")] for f in mine])
        # Two speakers who took up the same hobby, in different sessions.
        by_hobby: dict[str, list[Fact]] = {}
        for f in facts:
            if f.topic.key == "hobby":
                by_hobby.setdefault(f.slots["hobby"], []).append(f)
        for hobby, group in sorted(by_hobby.items()):
            owners = {f.owner: f for f in group}
            if len(owners) >= 2:
                a, b = sorted(owners)[:2]
                add("multi_hop", SHARED[0].format(p=a, q=b), hobby,
                    [where[(id(owners[a]), "say")], where[(id(owners[b]), "say")]])
        return out


def _template_of(fact: Fact, key: str) -> str:
    """The template a fact's text came from (the ones with a relative time say so)."""
    text = fact.texts.get(key, "")
    ago = fact.slots["ago"]
    return "{ago}" if ago in text or ago[0].upper() + ago[1:] in text else ""


def render(shapes=SHAPES, specific_filler: bool = False, session_times: bool = False) -> str:
    return "".join(json.dumps(Builder(*shape, specific_filler=specific_filler,
                                      session_times=session_times).build(),
                              ensure_ascii=False) + "\n" for shape in shapes)


def main(argv: list[str] | None = None) -> int:
    parser = jsonl_out.parser(__doc__)
    parser.add_argument("--specific-filler", action="store_true",
                        help="small talk full of names and places too (robustness check)")
    parser.add_argument("--session-times", action="store_true",
                        help="every turn carries its session's start time, as real chat "
                             "logs do (the framing measurement)")
    args = parser.parse_args(argv)
    return jsonl_out.emit(render(specific_filler=args.specific_filler,
                                 session_times=args.session_times), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
