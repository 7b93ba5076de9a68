"""Build examples/eval_conversations.jsonl, the evidence-retention example for `rms-duck eval`.

Three invented two-person conversations (DESIGN.md section 8 format): hand-written evidence
turns, distractor turns that share their words, and deterministic small talk so that the
conversations are longer than a 2K or 4K context. Run `python tests/make_eval_conversations.py
--out examples/eval_conversations.jsonl` to rebuild it; the output never changes
(tests/test_eval.py checks that the shipped file is this script's output).
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import jsonl_out  # noqa: E402  (the generators' shared --out handling)

SMALL_TALK = (
    "Honestly this week has been a blur of emails and half-finished to-do lists.",
    "The weather flipped again, sunny in the morning and pouring rain by lunch.",
    "I tried a new coffee place near the station, the oat latte was decent but pricey.",
    "Did you watch the finale of that detective series everyone keeps talking about?",
    "I keep meaning to clean out the garage but it never happens on a weekend.",
    "My phone screen cracked again, third time this year, I should buy a better case.",
    "We had a long meeting about the new budget and nobody agreed on anything.",
    "I have been reading a thick history book about the Silk Road in the evenings.",
    "The neighbours are renovating their kitchen, so there is drilling every morning.",
    "I finally fixed the squeaky door in the hallway with a bit of oil.",
    "Traffic on the ring road was terrible, it took me an hour to get home.",
    "I made soup with whatever vegetables were left in the fridge and it worked out.",
    "The kids next door started learning the trumpet, which is a lot at seven in the morning.",
    "I signed up for a newsletter about gardening and now I get three emails a day.",
    "We played board games on Friday night and I lost every single round.",
    "My laptop needed an update that took forever, so I read a magazine instead.",
    "I think I need new running shoes, the soles on mine are completely flat.",
    "There was a street market downtown with handmade soaps and far too many candles.",
    "I lost my umbrella on the bus, which is typical for a week like this.",
    "My cousin sent photos from her holiday, lots of beaches and very blue water.",
    "I have been trying to drink more water, there is a bottle on my desk all day now.",
    "The library had a sale on old paperbacks and I came home with eleven of them.",
    "We ordered pizza on Sunday because nobody wanted to cook after the long walk.",
    "I rearranged the living room furniture and now the sofa faces the window.",
    "Work is calmer this month, fewer deadlines and more time to think.",
    "I watched a documentary about octopuses, they are much smarter than I thought.",
    "The power went out for two hours on Tuesday, so we played cards by candlelight.",
    "I keep forgetting to water the plants on the balcony, two of them look sad.",
    "We finally booked the dentist appointments we had been postponing for months.",
    "I started a puzzle with a thousand pieces and it has taken over the dining table.",
    "The bakery on the corner has a new sourdough that is worth the queue.",
    "My internet was painfully slow all week, the provider says it is fixed now.",
    "I went to a friend's birthday dinner and we stayed until the restaurant closed.",
    "There is a new bike lane on my street and it makes commuting much nicer.",
    "I tried meditating for ten minutes each morning, some days it even works.",
    "The car needed new tyres, which was not in the plan for this month.",
    "I cleaned out my email inbox and felt lighter for about a day.",
    "We watched an old black-and-white film and it was better than expected.",
    "I spent Saturday helping a friend move boxes up four flights of stairs.",
    "I bought a cheap plant stand and assembling it took longer than it should have.",
)

REPLIES = (
    "Ha, that sounds about right.", "Oh no, that is annoying.", "That sounds lovely, honestly.",
    "I know exactly what you mean.", "Same here, it has been one of those weeks.",
    "That made me laugh.", "You should tell me more about that sometime.",
    "I would have done the same thing.", "Fair enough, that is reasonable.",
    "Wow, I did not expect that.",
)

CONVERSATIONS = [
    {
        "conversation_id": "ana-ben",
        "speakers": ("Ana", "Ben"),
        "start": datetime(2024, 3, 2, 18, 0),
        "sessions": [
            [("e1", "Ana", "Big news: I finally adopted a rescue greyhound last weekend, her name is Pepper."),
             ("e2", "Ben", "I started teaching a night class on woodworking at the community college."),
             ("d1", "Ben", "My neighbour's dog barks all night, so I am not sure I could ever own one."),
             ("d2", "Ana", "The shelter had so many animals, I wish I could have taken all of them home.")],
            [("e3", "Ana", "Pepper and I ran our first 5k on Saturday, a charity run that raised money for the animal shelter."),
             ("e4", "Ben", "My sister Clara is moving to Lisbon in June for a job at a design studio."),
             ("d3", "Ana", "Lisbon is on my list too, I have heard the food is wonderful."),
             ("d4", "Ben", "I used to run a lot in college but my knees disagree these days.")],
            [("e5", "Ana", "I switched from night shifts to day shifts at the hospital, so my mornings are mine again."),
             ("e6", "Ana", "I am allergic to cats, which is why I went with a dog and not a cat."),
             ("d5", "Ben", "A colleague of mine works nights at a hospital and says it wrecks her sleep."),
             ("d6", "Ben", "My aunt has four cats and her flat always smells of fish.")],
            [("e7", "Ben", "The woodworking class built birdhouses this week, and I painted mine blue."),
             ("e8", "Ana", "I signed up for a bouldering competition in Denver on May 18."),
             ("d7", "Ana", "Climbing at the gym has been busy, the new routes are really hard."),
             ("d8", "Ben", "One student glued his birdhouse roof on upside down, it was hilarious.")],
            [("e9", "Ana", "I placed third at the bouldering competition in Denver, my first podium ever!"),
             ("e10", "Ben", "Clara says Lisbon is lovely, and she already found a flat near the river."),
             ("d9", "Ben", "Denver is supposed to be beautiful in spring, I have never been."),
             ("d10", "Ana", "Pepper slept through the whole trip home, she is such a calm dog.")],
        ],
        "questions": [
            ("What is Ana's greyhound called?", "Pepper", "single_hop", ["e1"]),
            ("What did Ben start teaching at the community college?", "A night class on woodworking", "single_hop", ["e2"]),
            ("When did Ana run her first 5k with Pepper?", "On the Saturday before the second conversation", "temporal", ["e3"]),
            ("Why did Ana choose a dog rather than a cat, and what is the dog called?", "She is allergic to cats; the dog is Pepper", "multi_hop", ["e6", "e1"]),
            ("How did Ana do at the bouldering competition, and where was it held?", "Third place, in Denver", "multi_hop", ["e8", "e9"]),
            ("What colour did Ben paint his birdhouse?", "Blue", "single_hop", ["e7"]),
            ("Where is Ben's sister Clara living now and where is her flat?", "Lisbon, near the river", "multi_hop", ["e4", "e10"]),
        ],
    },
    {
        "conversation_id": "raj-mei",
        "speakers": ("Raj", "Mei"),
        "start": datetime(2024, 6, 10, 20, 30),
        "sessions": [
            [("e1", "Mei", "I quit my job at the bank to start a small bakery that sells only dumplings."),
             ("e2", "Raj", "I have been vegetarian for two years now, mostly for environmental reasons."),
             ("d1", "Raj", "My bank changed its app again and I cannot find anything in it."),
             ("d2", "Mei", "Dumplings were always my grandmother's thing, she made hundreds at New Year.")],
            [("e3", "Mei", "The bakery opens on the first of August in the old shoe shop on Carver Street."),
             ("e4", "Raj", "I am training for a sprint triathlon, the swim is what scares me most."),
             ("d3", "Mei", "Carver Street has so much traffic, parking will be a headache for customers."),
             ("d4", "Raj", "My gym added a pool but it is always full of children in the afternoon.")],
            [("e5", "Mei", "For you I will make a mushroom and cabbage dumpling, no meat at all."),
             ("e6", "Raj", "I moved into a flat with a small garden, and I planted tomatoes and basil."),
             ("d5", "Mei", "The landlord wants the bakery sign to be smaller than I planned."),
             ("d6", "Raj", "My parents grow chillies on their balcony, they are far too hot for me.")],
            [("e7", "Raj", "I finished the sprint triathlon in one hour and twenty-four minutes."),
             ("e8", "Mei", "The bakery sold out of dumplings by noon on opening day."),
             ("d7", "Raj", "After the race I ate an entire pizza by myself."),
             ("d8", "Mei", "A food blogger came by the bakery but she only took photos of the menu.")],
        ],
        "questions": [
            ("What kind of shop did Mei open after leaving the bank?", "A bakery that sells only dumplings", "single_hop", ["e1"]),
            ("Which dumpling filling will Mei make for Raj, and why?", "Mushroom and cabbage, because Raj is vegetarian", "multi_hop", ["e5", "e2"]),
            ("When and where does Mei's bakery open?", "On the first of August, in the old shoe shop on Carver Street", "temporal", ["e3"]),
            ("Which vegetables and herbs is Raj growing at his new place?", "Tomatoes and basil", "single_hop", ["e6"]),
            ("What was Raj's finishing time in the race?", "One hour and twenty-four minutes", "single_hop", ["e7"]),
            ("Would Raj eat a pork dumpling?", "No, he has been vegetarian for two years", "preference", ["e2"]),
            ("How did the bakery's opening day go?", "It sold out of dumplings by noon", "single_hop", ["e8"]),
        ],
    },
    {
        "conversation_id": "lucas-sofia",
        "speakers": ("Lucas", "Sofia"),
        "start": datetime(2024, 9, 5, 9, 15),
        "sessions": [
            [("e1", "Sofia", "I started learning Japanese with an online tutor twice a week before my trip to Osaka."),
             ("e2", "Lucas", "I prefer trains over planes whenever I can, I get anxious when flying."),
             ("d1", "Lucas", "A friend of mine lived in Tokyo for a year and loved it."),
             ("d2", "Sofia", "My tutor says my pronunciation is fine but my grammar is a disaster.")],
            [("e3", "Sofia", "My flight to Osaka is on November 3, and I stay for two weeks."),
             ("e4", "Lucas", "I adopted two kittens from my sister, Miso and Tofu."),
             ("d3", "Lucas", "The train to the coast was delayed for an hour because of leaves on the line."),
             ("d4", "Sofia", "I need a new suitcase, the wheel on my old one broke in Rome.")],
            [("e5", "Lucas", "I am taking the night train to Vienna for my brother's wedding in October."),
             ("e6", "Sofia", "I passed the first level of the Japanese language test, the N5."),
             ("d5", "Sofia", "Weddings make me cry every time, even when I barely know the couple."),
             ("d6", "Lucas", "Miso keeps knocking pens off my desk while I work.")],
            [("e7", "Sofia", "In Osaka I took a cooking class and learned to make okonomiyaki."),
             ("e8", "Lucas", "The wedding in Vienna was beautiful, my brother cried during his speech."),
             ("d7", "Lucas", "Vienna has the best cakes, I came back two kilos heavier."),
             ("d8", "Sofia", "The food in Osaka was incredible, especially the street stalls at night.")],
        ],
        "questions": [
            ("How is Sofia preparing for her trip to Osaka?", "Learning Japanese with an online tutor twice a week", "single_hop", ["e1"]),
            ("How does Lucas travel to his brother's wedding, and why?", "By night train, because he prefers trains and is anxious flying", "multi_hop", ["e5", "e2"]),
            ("On what date does Sofia's flight leave?", "November 3", "temporal", ["e3"]),
            ("What are the names of Lucas's kittens?", "Miso and Tofu", "single_hop", ["e4"]),
            ("Which Japanese language test level did Sofia pass?", "N5, the first level", "single_hop", ["e6"]),
            ("Which dish did Sofia learn to make during her trip to Japan?", "Okonomiyaki", "single_hop", ["e7"]),
            ("Does Lucas enjoy flying?", "No, flying makes him anxious; he prefers trains", "preference", ["e2"]),
        ],
    },
]

SMALL_TALK_PER_SESSION = 40


def build(conv: dict, index: int) -> dict:
    """One conversation record: sessions of evidence, distractors and seeded small talk."""
    rng = random.Random(f"rms-duck-eval-{index}")
    speakers = conv["speakers"]
    turns, ids = [], {}
    for s, session in enumerate(conv["sessions"], start=1):
        lines = [(None, speakers[i % 2], None) for i in range(SMALL_TALK_PER_SESSION)]
        for key, speaker, text in session:
            lines.insert(rng.randrange(len(lines) + 1), (key, speaker, text))
        when = conv["start"] + timedelta(days=17 * (s - 1) + rng.randrange(3))
        for t, (key, speaker, text) in enumerate(lines, start=1):
            if text is None:
                text = rng.choice(SMALL_TALK) if rng.random() < 0.6 else rng.choice(REPLIES)
                if rng.random() < 0.4:
                    text += " " + rng.choice(SMALL_TALK)
            turn_id = f"S{s}:{t}"
            if key is not None:
                ids[key] = turn_id
            turns.append({"id": turn_id, "session": f"S{s}",
                          "time": (when + timedelta(minutes=2 * t)).isoformat() + "Z",
                          "speaker": speaker, "text": text})
    return conversation_record(conv, turns, ids)


def conversation_record(conv: dict, turns: list[dict], ids: dict) -> dict:
    """The JSONL record: the turns as given, each question's evidence keys mapped to turn ids."""
    questions = [
        {"id": f"{conv['conversation_id']}-q{q}", "question": question, "answer": answer,
         "category": category, "evidence": [ids[key] for key in evidence]}
        for q, (question, answer, category, evidence) in enumerate(conv["questions"], start=1)
    ]
    return {"conversation_id": conv["conversation_id"], "turns": turns, "questions": questions}


def render() -> str:
    return "".join(json.dumps(build(conv, i), ensure_ascii=False) + "\n"
                   for i, conv in enumerate(CONVERSATIONS))


def main(argv: list[str] | None = None) -> int:
    args = jsonl_out.parser(__doc__).parse_args(argv)
    return jsonl_out.emit(render(), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
