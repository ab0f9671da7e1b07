// The CLI's own plumbing declared in common.hpp: the --format flag, diagnostics and results on stderr/stdout, the
// flag-value guard and the parse-error exit of CLI11. What is not CLI-specific (tables, sections, derivations, the
// data directory) is the application layer's (app/output.hpp, app/workspace.hpp).
#include "common.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace gpuplan::cli {

void add_format_option(CLI::App& cmd, GlobalOptions& g) {
  cmd.add_option("--format,-f", g.format, "output format")
      ->check(CLI::IsMember({"text", "md", "json", "csv"}))
      ->capture_default_str();
}

int report(const Diagnostics& diags) {
  for (const auto& d : diags.items()) std::cerr << d.to_string() << '\n';
  return diags.has_errors() ? kExitInvalid : kExitOk;
}

void out(const std::string& s) { std::cout << s; }

namespace {
/// A numeric option's text that is NaN or an infinity in any spelling C and CLI11 accept ("nan", "-NaN(0x1)",
/// "inf", "+Infinity"), or a finite-looking number beyond double range ("1e999", which strtod turns into inf).
bool non_finite_number(const std::string& text) {
  std::string t;
  for (const char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t i = 0;
  while (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
  if (t.compare(i, 3, "nan") == 0 || t.compare(i, 3, "inf") == 0) return true;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  return end != t.c_str() && !std::isfinite(v);
}

/// An integer option's text that is a decimal integer beyond int64 ("18446744073709551616"): CLI11 converts it with
/// strtoll, which saturates at 9223372036854775807 without a word.
bool beyond_int64(const std::string& text) {
  std::size_t i = text.size() > 0 && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (i == text.size() || text.find_first_not_of("0123456789", i) != std::string::npos) return false;
  errno = 0;
  (void)std::strtoll(text.c_str(), nullptr, 10);
  return errno == ERANGE;
}

void guard_options(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0) continue;  // a switch takes no value
    const std::string type = opt->get_type_name();
    const bool integer = type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0;
    const bool numeric = integer || type.rfind("FLOAT", 0) == 0 || type.rfind("NUMBER", 0) == 0;
    // First of the option's checks (transform() puts it in front; it changes nothing), so that a range check does not
    // speak first about a NaN; an empty description keeps the option's help text as it was.
    opt->transform(CLI::Validator(
        [numeric, integer](std::string& v) -> std::string {
          if (v.empty()) return "an empty value is not allowed (leave the flag out for its default)";
          if (numeric && non_finite_number(v))
            return "'" + v + "' is not a finite number (NaN and infinities are not allowed)";
          if (integer && beyond_int64(v)) return "'" + v + "' is outside the 64-bit integer range";
          return {};
        },
        "", "finite, non-empty"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) guard_options(*sub);
}
}  // namespace

void guard_flag_values(CLI::App& app) { guard_options(app); }

namespace {
/// The option `name` ("--sp") of `app` or any subcommand that may take no value (expected 0..1), or nullptr.
const CLI::Option* optional_value_option(CLI::App& app, const std::string& name) {
  if (const CLI::Option* o = app.get_option_no_throw(name); o != nullptr && o->get_type_size() != 0 &&
                                                             o->get_expected_min() == 0)
    return o;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (const CLI::Option* o = optional_value_option(*sub, name)) return o;
  return nullptr;
}
}  // namespace

void refuse_empty_switch_values(CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string tok = argv[i];
    if (tok.size() < 3 || tok.compare(0, 2, "--") != 0) continue;
    const auto eq = tok.find('=');
    const std::string name = tok.substr(0, eq);
    const bool empty = eq != std::string::npos ? eq + 1 == tok.size() : i + 1 < argc && argv[i + 1][0] == '\0';
    if (empty && optional_value_option(app, name) != nullptr)
      throw CLI::ValidationError(name, "an empty value is not allowed (leave the flag out for its default)");
  }
}

int exit_for_parse_error(CLI::App& app, const CLI::ParseError& e) {
  const int code = e.get_exit_code();
  if (code == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // help, version: print, exit 0
  std::string what = e.what();
  // CLI11 writes "--tp: Value 0 not in range 1 to 1024" for an option's value; other errors have no flag in front.
  const auto colon = what.find(": ");
  if (!what.empty() && what[0] == '-' && colon != std::string::npos)
    what = what.substr(0, colon) + ": error: " + what.substr(colon + 2);
  else
    what = "error: " + what;
  std::cerr << what << "\nRun with --help for the flags and their ranges.\n";
  return kExitInvalid;
}

int finish_output(int rc) {
  std::cout.flush();
  errno = 0;
  const bool failed = !std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed) return rc;
  const int err = errno;
  std::cerr << "error: the output could not be written to stdout" << (err != 0 ? ": " : "")
            << (err != 0 ? std::strerror(err) : "") << '\n';
  return kExitInvalid;
}

}  // namespace gpuplan::cli
