// Bash arithmetic expansion (cli/shell_arithmetic.hpp), and $(( ... )) in launch scripts read by the shell lexer
// (cli/shell_words.hpp). Expected values are bash's, worked out by hand from bash(1) ARITHMETIC EVALUATION (64-bit
// integers, C's truncating division, the operator table there).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "megatron_args.hpp"
#include "shell_arithmetic.hpp"
#include "shell_words.hpp"
#include "test_paths.hpp"

using namespace gpuplan;
using namespace gpuplan::cli;

namespace {

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

shell_arithmetic::Result eval(const std::string& expr, const std::map<std::string, std::string>& vars = {}) {
  return shell_arithmetic::evaluate(expr, [&](const std::string& name) -> shell_arithmetic::VarValue {
    if (auto it = vars.find(name); it != vars.end()) return {it->second, {}};
    return {std::nullopt, "is not set; bash would read it as 0"};
  });
}

long long value(const std::string& expr, const std::map<std::string, std::string>& vars = {}) {
  const auto r = eval(expr, vars);
  INFO(expr << ": " << r.why);
  REQUIRE(r.value);
  return *r.value;
}

std::string why(const std::string& expr, const std::map<std::string, std::string>& vars = {}) {
  const auto r = eval(expr, vars);
  CHECK_FALSE(r.value);
  return r.why;
}

/// The words of the one command of `text`.
std::vector<ShellWord> command_words(const std::string& text, Diagnostics& d) {
  auto cmds = read_shell_commands(text, "run.sh", d);
  REQUIRE(cmds);
  REQUIRE(cmds->size() == 1);
  return cmds->front().words;
}

}  // namespace

TEST_SUITE("shell arithmetic") {
  TEST_CASE("the operators launch scripts use, with bash's precedence and C's truncating division") {
    CHECK(value("8*4") == 32);
    CHECK(value(" 2 + 3 * 4 ") == 14);
    CHECK(value("(2 + 3) * 4") == 20);
    CHECK(value("7 / 2") == 3);
    CHECK(value("-7 / 2") == -3);  // toward zero
    CHECK(value("-7 % 2") == -1);
    CHECK(value("2 ** 3 ** 2") == 512);  // right to left: 2^9
    CHECK(value("-2 ** 2") == 4);        // unary minus binds tighter than ** in bash
    CHECK(value("10 - 2 - 3") == 5);     // left to right
    CHECK(value("1 << 4") == 16);
    CHECK(value("3 < 4") == 1);
    CHECK(value("4 <= 3") == 0);
    CHECK(value("8 == 8 && 2 != 3") == 1);
    CHECK(value("0 || 0") == 0);
    CHECK(value("!0") == 1);
    CHECK(value("6 & 3 | 8 ^ 1") == 11);  // (6&3)=2, 8^1=9, 2|9=11
    CHECK(value("5 > 3 ? 10 : 20") == 10);
    CHECK(value("0x10 + 010") == 24);  // hex 16, octal 8
    CHECK(value("2#101 + 16#ff") == 260);  // base#digits: 5 + 255
    CHECK(value("") == 0);             // $(( )) is 0
  }

  TEST_CASE("variables by bare name: their values are expressions of their own, an empty one is 0") {
    const std::map<std::string, std::string> v{{"NNODES", "4"}, {"GPUS_PER_NODE", "8"}, {"TWICE", "NNODES*2"},
                                               {"EMPTY", ""}, {"PADDED", " 3 "}};
    CHECK(value("NNODES * GPUS_PER_NODE", v) == 32);
    CHECK(value("TWICE + 1", v) == 9);
    CHECK(value("EMPTY + 1", v) == 1);
    CHECK(value("PADDED * 2", v) == 6);
  }

  TEST_CASE("what cannot be evaluated says why") {
    CHECK(why("8 / 0") == "division by zero, which bash refuses");
    CHECK(why("8 % (2 - 2)") == "remainder by zero, which bash refuses");
    CHECK(why("2 ** -1") == "a negative exponent, which bash refuses");
    CHECK(why("NNODES * 8") == "NNODES is not set; bash would read it as 0");
    CHECK(why("1.5 * 2") == "'1.5' is not an integer (bash arithmetic has no fractions)");
    CHECK(why("08") == "'08' is not an integer");  // a leading 0 is octal, as bash reads it
    CHECK(why("1#1") == "'1#1' is not an integer in a base 2 to 36");
    CHECK(why("LR * 2", {{"LR", "1.5e-4"}}) == "LR is '1.5e-4', not an integer");
    CHECK(why("9223372036854775807 + 1") == "the result of '+' overflows 64-bit integers");
    CHECK(why("3000000000 * 4000000000") == "the result of '*' overflows 64-bit integers");
    CHECK(why("N = 3", {{"N", "1"}}) == "'N=' assigns, which gpuplan does not evaluate");
    CHECK(why("N++", {{"N", "1"}}) == "++ and -- change variables, which gpuplan does not evaluate");
    CHECK(why("(1 + 2") == "a '(' is not closed");
    CHECK(why("2 +") == "an operand is missing");
    CHECK(why("A", {{"A", "A+1"}}) == "A's value refers to itself");
  }

  TEST_CASE("in a script: $(( )) with $VAR, bare names and ${NAME:-default}, as a flag value and in an assignment") {
    // Megatron-LM examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh: WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES)).
    Diagnostics d;
    const auto w = command_words("GPUS_PER_NODE=8\nNUM_NODES=${NNODES:-2}\nWORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))\n"
                                 "MICRO=2\nDP=$(( WORLD_SIZE / 2 ))\n"
                                 "python pretrain_gpt.py --global-batch-size $((MICRO * DP * 4)) --x \"$(( 1 + 1 ))\" "
                                 "--y $(( (WORLD_SIZE - 8) ** 2 ))\n",
                                 d);
    INFO(d.to_string());
    REQUIRE(w.size() == 8);  // python pretrain_gpt.py, then three flags with their values
    CHECK(w[3].text == "64");  // 2 * (16 / 2) * 4
    CHECK(w[3].unresolved.empty());
    CHECK(w[5].text == "2");
    CHECK(w[7].text == "64");  // (16 - 8)^2
  }

  TEST_CASE("a command substitution of a subshell is not arithmetic") {
    Diagnostics d;
    const auto w = command_words("python pretrain_gpt.py --save $( (cd /tmp; pwd) )\n", d);
    REQUIRE(w.size() >= 4);  // split at its blanks, as an unset expansion is (shell_words.cpp)
    CHECK_FALSE(w[3].unresolved.empty());
    CHECK(w[3].unresolved.front() == "$( (cd /tmp; pwd) )");
  }

  TEST_CASE("an expansion that cannot be evaluated is refused where a mapped flag uses it, naming line and reason") {
    auto refused = [](const std::string& script) {
      Diagnostics d;
      auto cmd = read_megatron_script(script, "run.sh", d);
      REQUIRE(cmd);
      auto args = parse_megatron_words(cmd->words, true, "run.sh", d);
      REQUIRE(args);
      CHECK_FALSE(map_megatron(*args, d));
      return d.to_string();
    };
    CHECK(has(refused("MICRO=2\nACC=0\nGBS=$((MICRO*8/ACC))\npython pretrain_gpt.py --global-batch-size $GBS\n"),
              "run.sh:4: --global-batch-size: error: '--global-batch-size $((MICRO*8/ACC))': uses $((MICRO*8/ACC)) "
              "(line 3: division by zero, which bash refuses), which gpuplan cannot evaluate"));
    CHECK(has(refused("python pretrain_gpt.py --micro-batch-size $(( NNODES * 8 ))\n"),
              "uses $(( NNODES * 8 )) (line 1: NNODES is not set; bash would read it as 0), which gpuplan cannot "
              "evaluate"));
    CHECK(has(refused("python pretrain_gpt.py --seq-length $(( $SEQ * 2 ))\n"),
              "uses $(( $SEQ * 2 )) (line 1: uses $SEQ), which gpuplan cannot evaluate"));
    CHECK(has(refused("FRAC=0.5\npython pretrain_gpt.py --micro-batch-size $((FRAC * 4))\n"),
              "uses $((FRAC * 4)) (line 2: FRAC is '0.5', not an integer), which gpuplan cannot evaluate"));
    CHECK(has(refused("if [ -f cfg ]; then N=4; fi\npython pretrain_gpt.py --micro-batch-size $((N))\n"),
              "(line 2: N is set inside an if/for/while/case block at line 1), which gpuplan cannot evaluate"));
  }

  TEST_CASE("an expansion that cannot be evaluated only feeding an ignored flag is noted") {
    Diagnostics d;
    auto cmd = read_megatron_script("python pretrain_gpt.py --bf16 --lr-warmup-iters $((WARM / 0))\n", "run.sh", d);
    REQUIRE(cmd);
    auto args = parse_megatron_words(cmd->words, true, "run.sh", d);
    REQUIRE(args);
    auto m = map_megatron(*args, d);
    REQUIRE(m);
    CHECK(m->notes.front() == "--lr-warmup-iters uses $((WARM / 0)) (line 1: WARM is not set; bash would read it as 0) "
                              "(not evaluated; ignored anyway)");
  }
}

TEST_SUITE("shell arithmetic: published launch scripts (tests/fixtures/megatron)") {
  TEST_CASE("Megatron-LM examples/gptoss/02_train.sh: PP_SIZE=${WORLD_SIZE} from $(($GPUS_PER_NODE*$NUM_NODES)) = 8") {
    // Read by hand: GPUS_PER_NODE=8, NUM_NODES=1 (then ${GPUS_PER_NODE:-8}, ${NUM_NODES:-1}); WORLD_SIZE = 8 * 1;
    // PP_SIZE=${WORLD_SIZE} feeds --pipeline-model-parallel-size. Its --export-force-local-attention is not in
    // Megatron-LM's parser at the pinned commit (the example predates the flag's removal), so the parse stops there,
    // as Megatron-LM's argparse would.
    std::ifstream in(std::string(GPUPLAN_TEST_FIXTURES) + "/megatron/gptoss_02_train.sh");
    REQUIRE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    Diagnostics d;
    auto cmd = read_megatron_script(ss.str(), "02_train.sh", d);
    INFO(d.to_string());
    REQUIRE(cmd);
    CHECK(cmd->launcher_gpus == 8);
    bool pp8 = false;
    for (std::size_t k = 0; k + 1 < cmd->words.size(); ++k)
      if (cmd->words[k].text == "--pipeline-model-parallel-size")
        pp8 = cmd->words[k + 1].text == "8" && cmd->words[k + 1].unresolved.empty();
    CHECK(pp8);
    CHECK_FALSE(parse_megatron_words(cmd->words, true, "02_train.sh", d));
    CHECK(has(d.to_string(), "02_train.sh:253: --export-force-local-attention: error: unknown flag"));
  }
}
