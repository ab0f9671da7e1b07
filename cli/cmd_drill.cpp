// `gpuplan drill`: the interview drills of data/drills/textbook.json (the GUI's Interview drills tab) in the
// terminal. List them, read one, answer it (--answer) or reveal it: the verdict, the model's answer and its
// derivation. Exit 0 right (or nothing to check), 1 wrong, 2 invalid input (an unknown drill, an unreadable answer).
#include <algorithm>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/app/drills.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"

namespace gpuplan::cli {
namespace {

inline constexpr int kExitWrong = 1;

struct DrillFlags {
  std::string id;
  std::optional<std::string> answer;
  bool list = false, reveal = false;
  std::string topic;
  std::string file;  // empty: <data>/drills/textbook.json
};

std::string stated_line(const Drill& d) {
  std::string o;
  if (d.stated_answer)
    o += fmt::format("stated in {}: {} {}\n", d.source, units::format_number(*d.stated_answer, 4), d.unit);
  if (!d.note.empty()) o += d.note + "\n";
  if (!d.model_differs.empty()) o += "where the model differs: " + d.model_differs + "\n";
  if (d.common_wrong_answer && !d.common_wrong_why.empty())
    o += fmt::format("common wrong answer: {} {} ({})\n", units::format_number(*d.common_wrong_answer, 4), d.unit,
                     d.common_wrong_why);
  return o;
}

int run_drill(const GlobalOptions& g, const DrillFlags& f) {
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const std::string& dir = ws->data_dir;
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  const DrillContext ctx{&lib, &db, ""};
  const std::string path = f.file.empty() ? dir + "/drills/textbook.json" : f.file;
  auto set = load_drills(path, f.file.empty() ? "data/drills/textbook.json" : f.file, ctx);
  if (!set.ok()) return report(set.diagnostics());
  const Format fmt_ = parse_format(g.format);

  if (f.list || f.id.empty()) {
    if (!f.topic.empty()) {
      const auto topics = set->topics();
      if (std::find(topics.begin(), topics.end(), f.topic) == topics.end()) {
        diags.error("", "--topic", fmt::format("no drill has topic '{}'{}", f.topic, did_you_mean(f.topic, topics)));
        return report(diags);
      }
    }
    Table t;
    t.columns = {{"id", "drill"}, {"topic", "topic"}, {"unit", "unit"}, {"question", "question"}};
    for (const auto& d : set->drills)
      if (f.topic.empty() || d.topic == f.topic) t.rows.push_back({d.id, d.topic, d.unit, d.question});
    out(t.render(fmt_));
    return kExitOk;
  }

  const Drill* d = set->find(f.id);
  if (d == nullptr) {
    std::vector<std::string> ids;
    for (const auto& x : set->drills) ids.push_back(x.id);
    diags.error("", "DRILL", fmt::format("unknown drill '{}'{}", f.id, did_you_mean(f.id, ids)));
    return report(diags);
  }
  std::optional<double> given;
  if (f.answer) {
    auto p = parse_answer(*f.answer, drill_unit(*d));
    if (!p.ok()) {
      for (const auto& x : p.diagnostics().items()) diags.error("", "--answer", x.message);
      return report(diags);
    }
    given = p.value();
  }
  const bool show = given.has_value() || f.reveal;
  std::optional<DrillAnswer> a;
  if (show) {
    auto r = answer_drill(*set, *d, ctx);
    if (!r.ok()) return report(r.diagnostics());
    a = std::move(r.value());
  }
  std::optional<Verdict> v;
  if (given) v = check_answer(*given, a->value, d->rel_tolerance, d->common_wrong_answer);

  if (fmt_ == Format::json) {
    nlohmann::ordered_json j{{"id", d->id},         {"topic", d->topic}, {"question", d->question},
                             {"source", d->source}, {"unit", d->unit},   {"rel_tolerance", d->rel_tolerance}};
    if (a) {
      j["answer"] = a->value;
      if (d->stated_answer) j["stated_answer"] = *d->stated_answer;
      j["derivation"] = derivation_json(a->derivation);
    }
    if (v) j["verdict"] = {{"correct", v->correct}, {"given", v->given}, {"relative_error", v->relative_error},
                           {"common_wrong_answer", v->common_wrong}};
    out(json_text(j));
  } else {
    std::string o = fmt::format("{} ({}, {})\n{}\nanswer in {}\n", d->id, d->topic, d->source, d->question, d->unit);
    if (v) {
      o += "\n" + describe(*v, d->unit, d->rel_tolerance) + "\n";
      if (v->common_wrong && !d->common_wrong_why.empty()) o += "the common mistake: " + d->common_wrong_why + "\n";
    }
    if (a) {
      o += fmt::format("\nmodel's answer: {} {}\n", units::format_number(a->value, 4), d->unit) + stated_line(*d);
      o += "\n" + render_derivation(a->derivation, fmt_);
    } else {
      o += "\n(check an answer with --answer X, or --reveal)\n";
    }
    out(o);
  }
  return v && !v->correct ? kExitWrong : kExitOk;
}

}  // namespace

void register_drill(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<DrillFlags>();
  auto* c = app.add_subcommand("drill", "interview drills: answer a worked question and see the model's derivation");
  c->add_option("DRILL", f->id, "drill id (see --list)");
  c->add_flag("--list", f->list, "list the drills (the default without DRILL)");
  c->add_option("--topic", f->topic, "list only this topic");
  c->add_option("--answer", f->answer, "your answer, e.g. 156, 1.2e3 or '70 GB': exit 0 right, 1 wrong");
  c->add_flag("--reveal", f->reveal, "show the model's answer and derivation without checking");
  c->add_option("--drills", f->file, "drill file (default: <data>/drills/textbook.json)");
  add_format_option(*c, g);
  c->callback([&g, &rc, f] { rc = run_drill(g, *f); });
}

}  // namespace gpuplan::cli
