"""The notebooks' exercises, graded outside nbval, and the notebooks run twice in one kernel.

For each notebook one kernel (started the way nbval starts one, in the notebooks' folder):

1. Run All: the check cell of the untouched notebook says "not answered yet";
2. Run All again in the same kernel: every output is the same as the first time, after the
   rules of notebooks/sanitize.cfg (cells whose output varies by design, tagged
   `nbval-ignore-output`, excepted);
3. for each answer below (a right one and several wrong ones), the answer cell is replaced and the
   exercise's cells (answer, experiment, check) are run: the check gives the expected verdict, and
   the same verdict when it runs again; for the first answer, the answer, the experiment and the
   check all run again and give the same verdict, and what they showed matches one of the answer
   patterns the notebook declares (so tests/notebooks/test_course.py would catch that answer in a committed
   output).

The cells are found by their tags: `exercise-answer` and `exercise-check`, with the cells between
them the experiment.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"

CAPSTONE_BUILD = ('my_build = {\n'
                  '    "user": lambda customer: customer,\n'
                  '    "confirmations": {"ana": [("preference", "language", "Portuguese"),\n'
                  '                              ("episode", "ticket.t-4471", "router drops every evening")],\n'
                  '                      "ben": [("preference", "channel", "email"),\n'
                  '                              ("episode", "ticket.q-9082", "invoice charged twice")]},\n'
                  '    "budget": BUDGET_,\n'
                  '    "forget": FORGET_,\n'
                  '}')


def _build(budget: str = "3000", forget: str = "forget_user",
           user: str = "lambda customer: customer", ana: str = "", language: str = "Portuguese") -> str:
    """The capstone's answer cell: the right build, with one choice changed."""
    source = CAPSTONE_BUILD.replace("BUDGET_", budget).replace("FORGET_", forget)
    source = source.replace("lambda customer: customer", user).replace('"Portuguese"', repr(language))
    return source.replace('"router drops every evening")]', '"router drops every evening")' + ana + "]")


def _city(*says: str, confirms: str | None = None, key: str = "city", value: str = "Lisbon",
          ask: str = "Which city do I live in?") -> str:
    """00's answer cell: what alice says, the confirmation (by default of `key` = `value`), the question."""
    if confirms is None:
        confirms = f"[(\"preference\", {key!r}, {value!r})]".replace("'", '"')
    return (f"first_session_says = {list(says)!r}\nfirst_session_confirms = {confirms}\n"
            f"second_session_says = [{ask!r}]")


def _wiring(remember: str = 'return proposal["key"] != "mood"',
            confirm: str = 'return (proposal["kind"], proposal["key"], proposal["value"]) in said_yes',
            retrieve: str = 'return [r for r in records if not r["value"].startswith("closed")]',
            forget: str = "store.forget_user(user)") -> str:
    """12's answer cell: the four functions of the support agent's memory wiring, and my_build."""
    return (f"def keep(proposal):\n    {remember}\n\n\ndef yes(proposal, said_yes):\n    {confirm}\n\n\n"
            f"def send(question, records):\n    {retrieve}\n\n\ndef gone(store, user):\n    {forget}\n\n\n"
            'my_build = {"remember": keep, "confirm": yes, "retrieve": send, "forget": gone}')


DELETE_KEYS = ("lambda store, user: [store.delete(user, r['kind'], r['key']) "
               "for r in store.records(user)]")


# Notebook 10, part (a): ways to decide Dana's waiting proposals (diet and name can be applied; the
# city was proposed against Lisbon, and she set Faro herself since: that proposal is stale).
REVIEW_RIGHT = """def my_review(store, user):
    for proposal in store.proposals(user):
        stale = proposal["stale"] or proposal["expired"]
        decide(store, user, proposal["id"], "reject" if stale else "approve")
"""
# Other ways a teacher would accept: try each approval and reject what is refused; the store's own
# approve and reject; the stale ones first, then the rest.
REVIEW_TRY = """def my_review(store, user):
    for proposal in store.proposals(user):
        if not decide(store, user, proposal["id"], "approve")["ok"]:
            decide(store, user, proposal["id"], "reject")
"""
REVIEW_STORE = """def my_review(store, user):
    for proposal in store.proposals(user):
        if proposal["stale"]:
            store.reject(user, proposal["id"], origin="review")
        else:
            store.approve(user, proposal["id"], origin="review")
"""
REVIEW_STALE_FIRST = """def my_review(store, user):
    waiting = store.proposals(user)
    for proposal in [p for p in waiting if p["stale"]]:
        decide(store, user, proposal["id"], "reject")
    for proposal in [p for p in waiting if not p["stale"]]:
        decide(store, user, proposal["id"], "approve")
"""
# Around the rule: Dana's answer known in advance (her city is the stale one); Eve's stale one is her diet.
REVIEW_BY_KEY = """def my_review(store, user):
    for proposal in store.proposals(user):
        decide(store, user, proposal["id"], "reject" if proposal["key"] == "city" else "approve")
"""
REVIEW_APPROVE_ALL = """def my_review(store, user):
    for proposal in store.proposals(user):
        decide(store, user, proposal["id"], "approve")
"""
REVIEW_REJECT_ALL = """def my_review(store, user):
    for proposal in store.proposals(user):
        decide(store, user, proposal["id"], "reject")
"""
# Around the rule: the values written directly, the proposals then rejected to clear the list.
REVIEW_AROUND = """def my_review(store, user):
    for proposal in store.proposals(user):
        if not proposal["stale"]:
            store.put(user, "review", proposal["kind"], proposal["key"], proposal["value"])
        decide(store, user, proposal["id"], "reject")
"""
# Around the rule: the stale proposal rejected, then proposed again and approved over her newer word.
REVIEW_PROPOSE_AGAIN = """def my_review(store, user):
    for proposal in store.proposals(user):
        decide(store, user, proposal["id"], "reject" if proposal["stale"] else "approve")
        if proposal["stale"]:
            again = store.propose_put(user, "review", "preference", "city", proposal["value"])
            decide(store, user, again["id"], "approve")
"""
_ASK = 'my_question = "Do I eat meat?"'

# notebook -> [(answer cell source, verdict label, text the verdict must hold)]
VARIANTS: dict[str, list[tuple[str, str, str]]] = {
    "00_start_here.ipynb": [
        (_city("My city is Lisbon"), "right", "from the file"),
        # right: judged on the idea (a confirmed save, recalled by a new process), in other words
        (_city("I live in Lisbon", ask="Where do I live?"), "right", "from the file"),
        (_city("Remember my city is Lisbon"), "right", "from the file"),
        (_city("I moved to Lisbon", ask="Where am I based?"), "right", "from the file"),
        (_city("Hello!", "I live in Lisbon now", ask="What's my home town?"), "right", "from the file"),
        (_city("I live in lisbon", value="lisbon", ask="Remind me where I live"), "right", "from the file"),
        (_city("I'm based in Lisbon now"), "right", "from the file"),
        (_city("I live in Lisbon these days", ask="Where's home for me?"), "right", "from the file"),
        (_city("Home is Lisbon now"), "right", "from the file"),
        (_city("I live in Lisbon", ask="Where do I stay these days?"), "right", "from the file"),
        # not right: nothing confirmed, or another value, key, question
        (_city("My city is Lisbon", confirms="[]"), "not right yet", "nobody confirmed what the model proposed"),
        (_city("My city is Lisbon", value="lisbon"), "not right yet", "a confirmation covers one exact value"),
        (_city("Lisbon is where I am"), "not right yet", "the stand-in model reads only the plain phrasings"),
        # Words the stand-in model does not read as her city (a place she is at, not where she lives):
        # the hint says so.
        (_city("I'm in Lisbon this week"), "not right yet", "a real model would read more"),
        (_city("Remember my home is Lisbon", key="home"), "not right yet", "not 'city'"),
        (_city("My city is Porto", value="Porto"), "not right yet", "alice lives in Lisbon"),
        (_city("My city is Lisbon", ask="What do I like to drink?"), "not right yet", "not about her city"),
        # "where", but not where she lives (the stand-in model answers her city all the same)
        (_city("My city is Lisbon", ask="Where was I born?"), "not right yet", "not about her city"),
        (_city("My city is Lisbon", ask="Where did I go on holiday?"), "not right yet", "not about her city"),
        # another person's city: nothing proposed, and the hint says whose it was
        (_city("My sister lives in Lisbon"), "not right yet", "where someone else lives"),
        (_city("My city is Lisbon", ask="Do I live in Lisbon?"), "not right yet", "already says 'Lisbon'"),
        ('first_session_says = "My city is Lisbon"\n'
         'first_session_confirms = [("preference", "city", "Lisbon")]\n'
         'second_session_says = ["Which city do I live in?"]', "not right yet", "could not run"),
        (_city("My city is Lisbon", confirms='[("preference", "city")]'), "not right yet", "could not run"),
        (_city("My city is Lisbon", confirms="None"), "not answered yet", "replace"),
    ],
    "01_schema_and_store.ipynb": [
        ('predicted = {"revision": 3, "events": 3}', "right", "counts changes"),
        # right: the same figures however they are written
        ('predicted = {"events": 3, "revision": 3}', "right", "counts changes"),
        ('predicted = {"revision": "3", "events": 3}', "right", "counts changes"),
        ('predicted = {"revision": "three", "events": "Three"}', "right", "counts changes"),
        ('predicted = {"revision": 3.0, "events": " 3 "}', "right", "counts changes"),
        ('predicted = {"revision": 1 + 2, "events": 3}', "right", "counts changes"),
        ('predicted = {"revision": 1, "events": 3}', "not right yet", "never goes back"),
        ('predicted = {"revision": 3, "events": 2}', "not right yet", "the create is an event too"),
        ('predicted = {"revision": 2, "events": 1}', "not right yet", "every change appends one event"),
        ('predicted = {"revision": "many", "events": 3}', "not right yet", "write a number"),
        ('predicted = {"revision": True, "events": 3}', "not right yet", "write a number, not True"),
        ('predicted = {"revision": 3}', "not right yet", "keep the names"),
        ('predicted = {"revision": 3, "events": None}', "not answered yet", "'events'"),
    ],
    "02_quotas_and_transactions.ipynb": [
        ('predicted = {"stored": 5, "new keys saved": 1, "updates saved": 6}', "right", "all six updates"),
        ('predicted = {"updates saved": 6, "stored": 5, "new keys saved": 1}', "right", "all six updates"),
        ('predicted = {"stored": "5", "new keys saved": "1", "updates saved": "6"}', "right", "all six updates"),
        ('predicted = {"stored": "five", "new keys saved": "one", "updates saved": "six"}', "right",
         "all six updates"),
        ('predicted = {"stored": 5.0, "new keys saved": 1, "updates saved": 6.0}', "right", "all six updates"),
        ('predicted = {"stored": 7, "new keys saved": 3, "updates saved": 6}', "not right yet", "no two writers"),
        ('predicted = {"stored": 4, "new keys saved": 0, "updates saved": 6}', "not right yet", "takes it"),
        ('predicted = {"stored": 5, "new keys saved": 1, "updates saved": 2}', "not right yet", "needs no slot"),
        ('predicted = {"stored": "lots", "new keys saved": 1, "updates saved": 6}', "not right yet",
         "write a number"),
        ('predicted = {"stored": 5, "new keys": 1, "updates saved": 6}', "not right yet", "keep the names"),
        ('predicted = {"stored": 5, "new keys saved": None, "updates saved": 6}', "not answered yet", "new keys"),
    ],
    "03_approvals_and_the_agent_loop.ipynb": [
        ('my_script = [call("memory_put", kind="preference", key="drink", value="green tea"), "Saved."]',
         "right", "saved on confirmation exercise#1"),
        # right: the arguments in another order, another reply, a read before the write
        ('my_script = [call("memory_put", value="green tea", key="drink", kind="preference"), "Done."]',
         "right", "saved on confirmation exercise#"),
        ('my_script = [call("memory_get", kind="preference", key="drink"),\n'
         '             call("memory_put", kind="preference", key="drink", value="green tea"),\n'
         '             "Your drink is now green tea."]', "right", "saved on confirmation exercise#"),
        ('my_script = [call("memory_search", query="drink"),\n'
         '             call("memory_put", kind="preference", key="drink", value="green tea"), "OK."]',
         "right", "saved on confirmation exercise#"),
        ('my_script = [call("memory_put", kind="preference", key="drink", value="green tea"),\n'
         '             "I saved green tea as your drink, as you confirmed."]', "right", "saved on confirmation"),
        ('my_script = [call("memory_put", kind="preference", key="drink", value="Green tea"), "Saved."]',
         "not right yet", "a different one"),
        ('my_script = ["Saved green tea."]', "not right yet", "only answered in text"),
        ('my_script = [call("memory_put", kind="preference", key="drink", value="green tea")]',
         "not right yet", "ran out of replies"),
        ('my_script = [call("memory_put", kind="preference", key="drink", value="green tea"),\n'
         '             call("memory_put", kind="preference", key="drink", value="green tea"), "Saved."]',
         "not right yet", "already used"),
        ('my_script = [call("memory_delete", kind="preference", key="drink"), "Deleted."]',
         "not right yet", "no confirmation to delete"),
        ('my_script = [{"name": "memory_put", "arguments": {"kind": "preference", "key": "drink",'
         ' "value": "green tea"}}, "Saved."]', "not right yet", "a tool call made with call(...)"),
        ('my_script = call("memory_put", kind="preference", key="drink", value="green tea")',
         "not right yet", "a script is a list of steps"),
        ('my_script = [None, "Saved."]', "not answered yet", "my_script"),
    ],
    "04_retrieval_and_budgets.ipynb": [
        ("answer = 2800", "right", "sends every request"),
        # right: the same budget however it is written
        ('answer = "2800"', "right", "sends every request"),
        ("answer = 2800.0", "right", "sends every request"),
        ('answer = "2,800 characters"', "right", "sends every request"),
        ("answer = 2_800", "right", "sends every request"),
        ('answer = " 2800 "', "right", "sends every request"),
        ("answer = 2700", "not right yet", "too small"),
        ("answer = 3500", "not right yet", "a smaller budget still works"),
        ("answer = 2850", "not right yet", "multiple of 100"),
        ('answer = "about 2800"', "not right yet", "whole number"),
        ("answer = 2800.5", "not right yet", "whole number"),
        ("answer = True", "not right yet", "whole number"),
        ("answer = None", "not answered yet", "write a budget"),
    ],
    "05_restart_simulation.ipynb": [
        ('predicted = {"after commit, NORMAL": 0, "before commit, 2 acks a kill": 4}', "right",
         "cannot undo a commit"),
        ('predicted = {"before commit, 2 acks a kill": 4, "after commit, NORMAL": 0}', "right",
         "cannot undo a commit"),
        ('predicted = {"after commit, NORMAL": "0", "before commit, 2 acks a kill": "4"}', "right",
         "cannot undo a commit"),
        ('predicted = {"after commit, NORMAL": "zero", "before commit, 2 acks a kill": "four"}', "right",
         "cannot undo a commit"),
        ('predicted = {"after commit, NORMAL": 0.0, "before commit, 2 acks a kill": 4.0}', "right",
         "cannot undo a commit"),
        ('predicted = {"after commit, NORMAL": 3, "before commit, 2 acks a kill": 4}', "not right yet",
         "outlive the killed process"),
        ('predicted = {"after commit, NORMAL": 0, "before commit, 2 acks a kill": 8}', "not right yet",
         "the one acknowledged before it had committed"),
        ('predicted = {"after commit, NORMAL": 0, "before commit, 2 acks a kill": 0}', "not right yet",
         "still inside its open"),
        ('predicted = {"after commit, NORMAL": 0, "before commit, 2 acks a kill": "some"}', "not right yet",
         "write a number"),
        ('predicted = {"after commit": 0, "before commit, 2 acks a kill": 4}', "not right yet", "keep the names"),
        ('predicted = {"after commit, NORMAL": 0, "before commit, 2 acks a kill": None}', "not answered yet",
         "before commit"),
    ],
    "06_user_isolation.ipynb": [
        ('predicted = {"alice\'s requests holding \'tea\'": 1, "Carol\'s records alice received": 0}',
         "right", "false alarm"),
        ('predicted = {"Carol\'s records alice received": 0, "alice\'s requests holding \'tea\'": 1}',
         "right", "false alarm"),
        ('predicted = {"alice\'s requests holding \'tea\'": "1", "Carol\'s records alice received": "0"}',
         "right", "false alarm"),
        ('predicted = {"alice\'s requests holding \'tea\'": "one", "Carol\'s records alice received": "none"}',
         "right", "false alarm"),
        ('predicted = {"alice\'s requests holding \'tea\'": 2, "Carol\'s records alice received": 0}',
         "not right yet", "you predicted 2"),
        ('predicted = {"alice\'s requests holding \'tea\'": "One", "Carol\'s records alice received": "zero"}',
         "right", "false alarm"),
        ('predicted = {"alice\'s requests holding \'tea\'": 1.0, "Carol\'s records alice received": 0}',
         "right", "false alarm"),
        ('predicted = {"alice\'s requests holding \'tea\'": 0, "Carol\'s records alice received": 0}',
         "not right yet", "alice's own 'jasmine tea' holds 'tea'"),
        ('predicted = {"alice\'s requests holding \'tea\'": 1, "Carol\'s records alice received": 1}',
         "not right yet", "retrieval reads only alice's rows"),
        ('predicted = {"alice\'s requests holding \'tea\'": 4, "Carol\'s records alice received": 0}',
         "not right yet", "one request"),
        ('predicted = {"alice\'s requests holding \'tea\'": "a few", "Carol\'s records alice received": 0}',
         "not right yet", "write a number"),
        ('predicted = {"alice\'s requests holding \'tea\'": 1, "Carol\'s records alice received": None}',
         "not answered yet", "Carol's records alice received"),
    ],
    "07_short_term_redis.ipynb": [
        ('predicted = {"after two more": {"window": 3, "pending": 2, "archive": 2},\n'
         '             "after idle + flush": {"window": 0, "pending": 0, "archive": 7}}', "right", "archives all 7"),
        ('predicted = {"after idle + flush": {"archive": 7, "window": 0, "pending": 0},\n'
         '             "after two more": {"pending": 2, "window": 3, "archive": 2}}', "right", "archives all 7"),
        ('predicted = {"after two more": {"window": "3", "pending": "2", "archive": "2"},\n'
         '             "after idle + flush": {"window": "0", "pending": "0", "archive": "7"}}', "right",
         "archives all 7"),
        ('predicted = {"after two more": {"window": "three", "pending": "two", "archive": "two"},\n'
         '             "after idle + flush": {"window": "zero", "pending": "zero", "archive": "seven"}}',
         "right", "archives all 7"),
        ('predicted = {"after two more": {"window": 3.0, "pending": 2, "archive": 2},\n'
         '             "after idle + flush": {"window": 0, "pending": 0, "archive": 7.0}}', "right", "archives all 7"),
        ('predicted = {"after two more": {"window": 3, "pending": 0, "archive": 4},\n'
         '             "after idle + flush": {"window": 0, "pending": 0, "archive": 7}}', "not right yet",
         "no flush ran after turns 6 and 7"),
        ('predicted = {"after two more": {"window": 3, "pending": 2, "archive": 2},\n'
         '             "after idle + flush": {"window": 3, "pending": 0, "archive": 4}}', "not right yet",
         "sweep margin"),
        ('predicted = {"after two more": {"window": 5, "pending": 2, "archive": 0},\n'
         '             "after idle + flush": {"window": 0, "pending": 0, "archive": 7}}', "not right yet",
         "after two more"),
        ('predicted = {"after two more": {"window": 3, "pending": 2, "archive": 2},\n'
         '             "after idle + flush": {"window": 0, "pending": 0, "archive": 5}}', "not right yet",
         "after idle + flush"),
        ('predicted = {"after two more": {"window": 3, "pending": 2, "archive": 2}}', "not right yet",
         "keep the names"),
        ('predicted = {"after two more": {"window": 3, "pending": 2, "archive": 2},\n'
         '             "after idle + flush": {"window": 0, "pending": None, "archive": 7}}', "not answered yet",
         "after idle + flush"),
    ],
    "08_memory_inspector.ipynb": [
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('Bergen')\n    inspector.confirm()",
         "right", "changed through the inspector on confirmation inspector#"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('Bergen')",
         "not right yet", "staged"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('bergen')\n    inspector.confirm()",
         "not right yet", "exactly 'Bergen'"),
        ("def move_to_bergen(inspector, user):\n    inspector.store.put(user, 'cli', 'preference', 'city', 'Bergen')",
         "not right yet", "not through the inspector"),
        # Around the rule: the inspector's session name and a confirmation id that looks like its own
        # (issue 22): the check reads which confirmations a Confirm of the inspector made.
        ("def move_to_bergen(inspector, user):\n"
         "    inspector.store.put(user, 'inspector', 'preference', 'city', 'Bergen', confirmation='inspector#1')",
         "not right yet", "no Confirm of the inspector made"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('Bergenx')\n"
         "    inspector.confirm()\n"
         "    inspector.store.put(user, 'inspector', 'preference', 'city', 'Bergen',\n"
         "                        confirmation=inspector.done[-1]['confirmation'])",
         "not right yet", "not through the inspector"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user('bob')\n"
         "    inspector.select_key('preference', 'city')\n    inspector.stage_edit('Bergen')",
         "not right yet", "inspector.select_user(user)"),
        ("def move_to_bergen(inspector, user):\n    inspector.select_user(user)\n    inspector.stage_edit('Bergen')",
         "not right yet", "refused a step"),
        ("move_to_bergen = None", "not answered yet", "move_to_bergen"),
    ],
    "09_scaling_out.ipynb": [
        ('predicted = {"hop 2: B, ticket": "forgotten", "hop 3: C, ticket": "forgotten", '
         '"hop 5: B, drink": "forgotten", "hop 6: C, drink": "forgotten"}',
         "right", "the files holding the drink: A"),
        ('predicted = {"hop 2: B, ticket": "recalled", "hop 3: C, ticket": "recalled", '
         '"hop 5: B, drink": "forgotten", "hop 6: C, drink": "forgotten"}',
         "not right yet", "whose keys carry its store's id"),
        ('predicted = {"hop 2: B, ticket": "forgotten", "hop 3: C, ticket": "forgotten", '
         '"hop 5: B, drink": "recalled", "hop 6: C, drink": "recalled"}',
         "not right yet", "saved with a confirmation, by A: into which store"),
        ('predicted = {"hop 2: B, ticket": "recalled", "hop 3: C, ticket": "forgotten", '
         '"hop 5: B, drink": "forgotten", "hop 6: C, drink": "forgotten"}',
         "not right yet", "hop 2: B, ticket: you predicted 'recalled'"),
        ('predicted = {"hop 2: B, ticket": "forgotten", "hop 3: C, ticket": "forgotten", '
         '"hop 5: B, drink": True, "hop 6: C, drink": "forgotten"}',
         "not right yet", "not True"),
        ('predicted = {"hop 2: B, ticket": "forgotten", "hop 3: C, ticket": "forgotten", '
         '"hop 5: B, drink": "forgotten", "hop 6: C, drink": None}',
         "not answered yet", "'hop 6: C, drink'"),
    ],
    "10_what_to_remember.ipynb": [
        (REVIEW_RIGHT + 'my_question = "Do I eat meat?"', "right", "the stale city proposal was rejected"),
        # (a) judged on what my_review did to Dana's store, never on its text
        (REVIEW_TRY + _ASK, "right", "the stale city proposal was rejected"),
        (REVIEW_STORE + _ASK, "right", "the stale city proposal was rejected"),
        (REVIEW_STALE_FIRST + 'my_question = "What should I cook for dinner?"', "right", "Faro stands"),
        (REVIEW_BY_KEY + _ASK, "not right yet", "Eve's (her stale proposal is the diet) ended"),
        (REVIEW_APPROVE_ALL + _ASK, "not right yet", "the city proposal still waits (it is stale"),
        (REVIEW_REJECT_ALL + _ASK, "not right yet", "the diet proposal was rejected, though nothing changed"),
        (REVIEW_AROUND + _ASK, "not right yet", "was written with no approved proposal in its history"),
        (REVIEW_PROPOSE_AGAIN + _ASK, "not right yet", "Dana's city is now 'Porto'"),
        ("my_review = lambda store, user: 1 / 0\n" + _ASK, "not right yet", "my_review stopped: ZeroDivisionError"),
        ('my_review = "approve all"\n' + _ASK, "not right yet", "my_review stopped: TypeError"),
        ("my_review = None\n" + _ASK, "not answered yet", "(b) right"),
        # (b) judged on what the two retrievals returned
        (REVIEW_RIGHT + "my_question = None", "not answered yet", "(a) right"),
        (REVIEW_RIGHT + 'my_question = "Am I vegetarian?"', "not right yet",
         "literal retrieval already finds the diet record"),
        (REVIEW_RIGHT + 'my_question = "Is my diet strict?"', "not right yet", "literal retrieval already finds"),
        (REVIEW_RIGHT + 'my_question = "What is the weather like?"', "not right yet", "the diet record scored"),
        (REVIEW_RIGHT + "my_question = 42", "not right yet", "not text"),
        (REVIEW_RIGHT + 'my_question = "   "', "not right yet", "query is blank"),
        (REVIEW_APPROVE_ALL + 'my_question = "Am I vegetarian?"', "not right yet", "(a) the city proposal"),
        ("my_review = None\nmy_question = None", "not answered yet", "my_review (a) and my_question (b)"),
    ],
    "11_where_agents_live.ipynb": [
        ('predicted = {"value": "vegan", "events": 1}', "right", "the late answer stored nothing"),
        # The value judged on the word, however it is written; the hint names the real mistake.
        ('predicted = {"value": "Vegan", "events": 1}', "right", "the late answer stored nothing"),
        ('predicted = {"value": "VEGAN", "events": 1}', "right", "the late answer stored nothing"),
        ('predicted = {"value": " vegan ", "events": 1}', "right", "the late answer stored nothing"),
        ('predicted = {"value": "vegan.", "events": 1}', "right", "the late answer stored nothing"),
        ("predicted = {\"value\": \"'vegan'\", \"events\": 1}", "right", "the late answer stored nothing"),
        ('predicted = {"value": "vegetarian", "events": 2}', "not right yet", "Is that what they approved?"),
        ('predicted = {"value": "Vegetarian", "events": 1}', "not right yet", "Is that what they approved?"),
        ('predicted = {"value": "nothing", "events": 1}', "not right yet", "one of the two values of this story"),
        ('predicted = {"value": "vegan or vegetarian", "events": 1}', "not right yet", "one of the two values"),
        ('predicted = {"value": "vegetarian", "events": 1}', "not right yet", "the key held 'vegan'"),
        ('predicted = {"value": "vegan", "events": 2}', "not right yet", "did the late answer make another?"),
        ('predicted = {"value": "vegan", "events": "a few"}', "not right yet", "write a number"),
        ('predicted = {"value": "vegan"}', "not right yet", "keep the names"),
        ('predicted = {"value": "vegan", "events": None}', "not answered yet", "'events'"),
    ],
    "12_capstone.ipynb": [
        # the four functions written in the answer cell: a right build, then one wrong part each
        (_wiring(), "right", "all four requirements hold"),
        (_wiring(remember="return True"), "not right yet", "remember kept ana's mood = 'grumpy'"),
        (_wiring(confirm='return any(k == proposal["key"] for _, k, _ in said_yes)'), "not right yet",
         "confirm approved ben's channel = 'phone'"),
        (_wiring(retrieve="return records"), "not right yet", "the budget trimmed"),
        (_wiring(retrieve='return [r for r in records if r["kind"] == "preference"]'), "not right yet",
         "retrieve left out the open ticket"),
        (_wiring(forget="for r in store.records(user):\n        store.delete(user, r['kind'], r['key'])"),
         "not right yet", "a delete keeps the history"),
        (_wiring(forget="store.forget_usr(user)"), "not right yet", "forget stopped: AttributeError"),
        (_wiring().replace('"retrieve": send', '"retrieve": None'), "not answered yet",
         "name them in my_build"),
    ],
}

LABELS = ("not answered yet", "right", "not right yet")


def _sanitizers() -> list[tuple[re.Pattern[str], str]]:
    """The `regex:` / `replace:` pairs of notebooks/sanitize.cfg, which nbval applies too."""
    lines = (NOTEBOOK_DIR / "sanitize.cfg").read_text(encoding="utf-8").splitlines()
    patterns = [line.split(":", 1)[1].strip() for line in lines if line.startswith("regex:")]
    replacements = [line.split(":", 1)[1].strip() for line in lines if line.startswith("replace:")]
    return [(re.compile(p), r) for p, r in zip(patterns, replacements, strict=True)]


SANITIZERS = _sanitizers()


def _sanitized(text: str) -> str:
    for pattern, replacement in SANITIZERS:
        text = pattern.sub(replacement, text)
    return text


def _text(cell: Any) -> str:
    """What a cell showed as text: streams and text/plain (images and widget views left out)."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output["text"])
        elif output.get("output_type") in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "application/vnd.jupyter.widget-view+json" not in data:
                parts.append(data.get("text/plain", ""))
                parts.append(data.get("text/html", ""))
    return "".join(parts)


def _verdict(cell: Any) -> str:
    lines = [line for line in _text(cell).splitlines() if line.startswith(LABELS)]
    assert len(lines) == 1, f"the check printed {_text(cell)!r}, not one verdict"
    return lines[0]


def _numbers_out(text: str) -> str:
    return re.sub(r"\d+", "N", text)


def _tagged(nb: Any, tag: str) -> int:
    found = [i for i, cell in enumerate(nb.cells) if tag in cell.get("metadata", {}).get("tags", [])]
    assert len(found) == 1, f"{len(found)} cells are tagged {tag!r}"
    return found[0]


def _varies(cell: Any) -> bool:
    return "nbval-ignore-output" in cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_exercise_verdicts_and_run_all_twice(name):
    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    answer_at, check_at = _tagged(nb, "exercise-answer"), _tagged(nb, "exercise-check")
    assert answer_at < check_at
    # The answer patterns the notebook declares (tests/notebooks/test_course.py): they must see the right answer.
    declared = nb.cells[answer_at].get("metadata", {}).get("memkit", {}).get("answer_patterns", [])
    patterns = [re.compile(pattern) for pattern in declared]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})

    def run(index: int, source: str | None = None) -> Any:
        cell = copy.deepcopy(nb.cells[index])
        if source is not None:
            cell.source = source
        client.execute_cell(cell, index)
        return cell

    def run_all() -> list[str]:
        outputs = []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                text = _sanitized(_text(run(index)))
                outputs.append("" if _varies(cell) else text)
        return outputs

    with client.setup_kernel():
        first = run_all()
        second = run_all()
        assert first == second, _first_difference(nb, first, second)
        assert _verdict(run(check_at)).startswith("not answered yet")

        for number, (source, label, expected) in enumerate(VARIANTS[name]):
            run(answer_at, source)
            shown = "".join(_text(run(index)) for index in range(answer_at + 1, check_at))
            checked = run(check_at)
            verdict = _verdict(checked)
            assert verdict.startswith(label) and expected in verdict, (source, verdict)
            if number == 0 and patterns:  # the declared patterns see the answer when it is shown
                revealed = shown + _text(checked)
                assert any(p.search(revealed) for p in patterns), (patterns, revealed[:600])
            assert _verdict(run(check_at)) == verdict, (source, verdict)  # the check again
            if number == 0:  # the answer, the experiment and the check again (experiments are the slow part)
                for index in range(answer_at, check_at + 1):
                    again = run(index, source if index == answer_at else None)
                # The same verdict; fresh names and ids (mover-2, inspector#3) may count on.
                assert _numbers_out(_verdict(again)) == _numbers_out(verdict), (source, verdict)


def _first_difference(nb: Any, first: list[str], second: list[str]) -> str:
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    # The runs may differ in length (the message below says so); compare what both have.
    for index, a, b in zip(code, first, second, strict=False):
        if a != b:
            return f"cell {index} differs on the second Run All:\n{a[:600]}\n---\n{b[:600]}"
    return "the runs differ in length"


def test_a_verdict_line_is_found_and_a_second_one_is_refused():
    cell = {"outputs": [{"output_type": "stream", "name": "stdout", "text": "right: fine\n"}]}
    assert _verdict(cell) == "right: fine"
    cell["outputs"].append({"output_type": "stream", "name": "stdout", "text": "not right yet: x\n"})
    with pytest.raises(AssertionError, match="not one verdict"):
        _verdict(cell)
    assert re.match("|".join(LABELS), "not answered yet: replace")


# The graders' own rules, without a kernel: a figure is judged on what it says, not how it is written.
MEASURED = {"value": "vegan", "events": 1, "window": {"pending": 2, "archive": 0}}
SAID_RIGHT = [
    {"value": "vegan", "events": 1, "window": {"pending": 2, "archive": 0}},
    {"value": "Vegan", "events": "1", "window": {"archive": 0, "pending": 2}},
    {"value": " VEGAN ", "events": "one", "window": {"pending": "two", "archive": "zero"}},
    {"events": 1.0, "value": "vegan", "window": {"pending": 2.0, "archive": "none"}},
    {"value": "vegan", "events": " 1 ", "window": {"pending": " 2", "archive": 0}},
]
SAID_WRONG = [
    ({"value": "vegan", "events": True, "window": {"pending": 2, "archive": 0}}, "write a number, not True"),
    ({"value": "vegan", "events": "a few", "window": {"pending": 2, "archive": 0}}, "write a number, not 'a few'"),
    ({"value": "vegetarian", "events": 1, "window": {"pending": 2, "archive": 0}}, "you predicted 'vegetarian'"),
    ({"value": "vegan", "events": 2, "window": {"pending": 2, "archive": 0}}, "events: you predicted 2, it is 1"),
    ({"value": "vegan", "events": 1, "window": {"pending": 2}}, "window: you predicted"),
    ({"value": "vegan", "events": 1}, "keep the names"),
]


@pytest.mark.parametrize("said", SAID_RIGHT)
def test_a_prediction_is_right_however_its_figures_are_written(said):
    from classroom.exercises import check_prediction

    verdict = check_prediction(said, MEASURED, hints={}, explanation="the store says so")
    assert verdict.right, verdict


@pytest.mark.parametrize(("said", "because"), SAID_WRONG)
def test_a_wrong_prediction_is_wrong_with_the_figure_named(said, because):
    from classroom.exercises import check_prediction

    verdict = check_prediction(said, MEASURED, hints={}, explanation="the store says so")
    assert verdict.state == "wrong" and because in verdict.message, verdict


@pytest.mark.parametrize(("answer", "number"), [
    (2800, 2800), ("2800", 2800), (2800.0, 2800), ("2,800 characters", 2800), (" 2800 ", 2800), ("2_800", 2800),
    ("about 2800", None), (2800.5, None), (True, None), ("", None), ([2800], None), ("2800 euros", None),
])
def test_whole_number_reads_a_budget_however_it_is_written(answer, number):
    from classroom.exercises import whole_number

    assert whole_number(answer) == number


@pytest.mark.parametrize(("said", "hint"), [("7", "more"), ("seven", "more"), (" 3 ", "fewer"), (3.0, "fewer")])
def test_a_hint_function_gets_a_number_written_as_text_as_a_number(said, hint):
    from classroom.exercises import check_prediction

    verdict = check_prediction({"stored": said}, {"stored": 5}, explanation="",
                               hints={"stored": lambda p: "more" if p > 5 else "fewer"})
    assert verdict.state == "wrong" and f"({hint})" in verdict.message, verdict
