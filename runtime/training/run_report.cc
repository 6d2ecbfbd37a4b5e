#include "runtime/training/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mt {
namespace {

// A chart's area and margins, in SVG pixels.
constexpr double kWidth = 640, kHeight = 240, kLeft = 64, kRight = 16, kTop = 28, kBottom = 32;

struct Series {
  std::string name;
  const char* color;
  std::vector<std::pair<double, double>> points;  // (step, value), finite
  bool dots = false;                              // few points: each drawn as a dot too
};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Axis labels: whole numbers from 1,000 (tokens/s), four significant digits below.
std::string number(double v) {
  return std::abs(v) >= 1000 && std::abs(v) < 1e12 ? fmt::format("{:.0f}", v) : fmt::format("{:.4g}", v);
}

// The points of `key` against "step" in the log lines that hold both as finite numbers.
std::vector<std::pair<double, double>> pointsOf(const std::vector<nlohmann::json>& log, const char* key) {
  std::vector<std::pair<double, double>> points;
  for (const nlohmann::json& line : log) {
    if (!line.is_object() || !line.contains("step") || !line.contains(key)) continue;
    const nlohmann::json &step = line["step"], &value = line[key];
    if (!step.is_number() || !value.is_number()) continue;
    const double x = step.get<double>(), y = value.get<double>();
    if (std::isfinite(x) && std::isfinite(y)) points.emplace_back(x, y);
  }
  return points;
}

// One chart: the series as lines over a shared step axis, with 5 ticks on each axis.
std::string chart(const std::string& title, const std::vector<Series>& series) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const Series& s : series)
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::string out = "<figure><figcaption>" + escape(title) + "</figcaption>\n";
  if (!std::isfinite(x0)) return out + "<p>nothing logged</p></figure>\n";
  if (x1 == x0) x1 = x0 + 1;
  const double pad = y1 > y0 ? 0.05 * (y1 - y0) : std::max(std::abs(y0) * 0.05, 1e-12);
  y0 -= pad, y1 += pad;
  const auto sx = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * (kWidth - kLeft - kRight); };
  const auto sy = [&](double y) { return kHeight - kBottom - (y - y0) / (y1 - y0) * (kHeight - kTop - kBottom); };
  out += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                     "role=\"img\" aria-label=\"{}\">\n",
                     kWidth, kHeight, kWidth, kHeight, escape(title));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#bbb\"/>\n", kLeft,
                     kTop, kWidth - kLeft - kRight, kHeight - kTop - kBottom);
  for (int i = 0; i <= 4; ++i) {
    const double y = y0 + (y1 - y0) * i / 4, x = x0 + (x1 - x0) * i / 4;
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n",
                       kLeft, sy(y), kWidth - kRight, sy(y), kLeft - 4, sy(y) + 4, number(y));
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", sx(x),
                       kHeight - kBottom + 16, number(std::round(x)));
  }
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">step</text>\n",
                     (kLeft + kWidth - kRight) / 2, kHeight - 2);
  double legend_x = kLeft;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    std::string points;
    for (const auto& [x, y] : s.points) points += fmt::format("{:.1f},{:.1f} ", sx(x), sy(y));
    out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", s.color, points);
    if (s.dots || s.points.size() == 1)
      for (const auto& [x, y] : s.points)
        out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", sx(x), sy(y), s.color);
    out += fmt::format("<text x=\"{:.1f}\" y=\"16\" font-size=\"12\" fill=\"{}\">&#9632; {}</text>\n", legend_x, s.color,
                       escape(s.name));
    legend_x += 14 + 7.0 * static_cast<double>(s.name.size());
  }
  return out + "</svg></figure>\n";
}

}  // namespace

std::string renderRunReport(const RunReport& report) {
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mtrun: " + escape(report.title) +
      "</title>\n<style>body{font:14px system-ui,sans-serif;margin:24px;color:#222;background:#fff}"
      "table{border-collapse:collapse;margin-bottom:8px}td{padding:2px 16px 2px 0;vertical-align:top}"
      "td:first-child{color:#666}figure{margin:18px 0}figcaption{font-weight:600;margin-bottom:4px}</style>\n"
      "</head><body>\n<h1>" + escape(report.title) + "</h1>\n<table>\n";
  for (const auto& [label, value] : report.facts)
    page += "<tr><td>" + escape(label) + "</td><td>" + escape(value) + "</td></tr>\n";
  page += "</table>\n";
  page += chart("Loss", {{"training loss", "#1f77b4", pointsOf(report.log, "loss")},
                         {"validation loss", "#d62728", pointsOf(report.log, "val_loss"), true}});
  page += chart("Learning rate", {{"lr", "#2ca02c", pointsOf(report.log, "lr")}});
  page += chart("Gradient norm (before clipping)", {{"norm", "#9467bd", pointsOf(report.log, "grad_norm")}});
  page += chart("Throughput", {{"tokens/s", "#ff7f0e", pointsOf(report.log, "tokens_per_s")}});
  // A mixture of experts: its router's load-balancing loss (top-k when the load is even).
  if (const auto aux = pointsOf(report.log, "aux_loss"); !aux.empty())
    page += chart("Router load-balancing loss (k when the experts' load is even)", {{"aux loss", "#8c564b", aux}});
  // The log as data: "</" escaped (valid JSON) so no string in it can end the script element.
  std::string data = nlohmann::json(report.log).dump();
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3)) data.replace(at, 2, "<\\/");
  page += "<script type=\"application/json\" id=\"run-log\">" + data + "</script>\n</body></html>\n";
  return page;
}

}  // namespace mt
