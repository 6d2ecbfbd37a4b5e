// mtrun --report FILE: a picture of the run as one self-contained HTML page (no script, no
// file or network fetched: it opens anywhere, and a browser renders it as written): the loss
// and the validation loss, the learning rate, the gradient norm and the tokens per second by
// step, as inline SVG charts; what ran and how fast against the plan's prediction, as a table;
// and the log lines it was drawn from, embedded as JSON (<script type="application/json"
// id="run-log">), so the numbers behind every point travel with the page.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mt {

struct RunReport {
  std::string title;                                        // the model's name
  std::vector<std::pair<std::string, std::string>> facts;  // label, value: the table, in order
  // mtrun --log's lines of this run: steps ({"step", "loss", "lr", "grad_norm", "tokens_per_s",
  // ...}) and validations ({"step", "val_loss", ...}).
  std::vector<nlohmann::json> log;
};

// The page.
std::string renderRunReport(const RunReport& report);

}  // namespace mt
