"""The compiled rule index answers exactly what matching the rules one by one answers."""

from fnmatch import fnmatchcase

from entropic_mcp._rulematch import RuleIndex, literal_prefix
from hypothesis import given, settings
from hypothesis import strategies as st


def reference(rules, names):
    return next((rule for rule in rules if any(fnmatchcase(name, rule) for name in names)), None)


# A small alphabet makes prefixes collide and wildcards meet literals often.
_LITERAL = st.sampled_from(list("ab./:- x"))
_TOKEN = st.one_of(_LITERAL, st.sampled_from(["*", "?", "[ab]", "[!a]", "[", "**"]))
RULES = st.lists(st.lists(_TOKEN, max_size=8).map("".join), max_size=12)
NAMES = st.lists(st.lists(_LITERAL, max_size=10).map("".join), min_size=1, max_size=4)


@settings(max_examples=600, deadline=None)
@given(RULES, NAMES, st.sampled_from([1, 3, 16]))
def test_the_index_agrees_with_matching_rule_by_rule(rules, names, trie_from):
    """Through a tool's trie (``trie_from`` rules and more) and through its one alternation."""
    assert RuleIndex(rules, trie_from=trie_from).first(names) == reference(rules, names)


@settings(max_examples=200, deadline=None)
@given(RULES, NAMES)
def test_a_name_matched_by_a_rule_starts_with_its_literal_prefix(rules, names):
    for rule in rules:
        for name in names:
            if fnmatchcase(name, rule):
                assert name.startswith(literal_prefix(rule))


def test_the_first_rule_in_order_wins_across_prefixes():
    rules = ["bash.execute:rm -rf *", "bash.*", "bash.execute:rm *"]
    assert RuleIndex(rules).first(["bash.execute:rm x"]) == "bash.*"
    assert RuleIndex(rules).first(["bash.execute:rm -rf x"]) == "bash.execute:rm -rf *"
    assert RuleIndex(rules[2:]).first(["bash.execute:rmdir x"]) is None


def test_realistic_rule_sets_match_like_the_reference():
    rules = [f"bash.execute:tool{i} *" for i in range(300)] + [f"filesystem.write_file:dir{i}/*" for i in range(300)]
    rules += ["git.status", "filesystem.read:*.env", "*:secret*", "bash.execute:ls *"]
    index = RuleIndex(rules)
    small = RuleIndex(rules, trie_from=10_000)
    for names in (
        ["bash.execute:ls -la"],
        ["bash.execute:tool42 --x"],
        ["filesystem.write:dir7/a", "filesystem.write_file:dir7/a"],
        ["filesystem.read:config/.env"],
        ["git.status"],
        ["git.log"],
        ["entropic.todo:secret-plan"],
        ["bash.execute:tool3"],
    ):
        assert index.first(names) == small.first(names) == reference(rules, names), names
