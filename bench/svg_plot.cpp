#include "bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace shmipam::bench {

namespace {

constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 70, kRight = 190, kTop = 40, kBottom = 55;
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                    "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"};

std::string num(double v) {
    char b[32];
    if (v != 0 && (std::fabs(v) >= 10000 || std::fabs(v) < 0.01)) {
        std::snprintf(b, sizeof b, "%.0e", v);
    } else {
        std::snprintf(b, sizeof b, "%g", v);
    }
    return b;
}

std::string escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '<') {
            o += "&lt;";
        } else if (c == '>') {
            o += "&gt;";
        } else if (c == '&') {
            o += "&amp;";
        } else {
            o += c;
        }
    }
    return o;
}

struct Axis {
    double lo, hi;
    bool log;
    double map(double v, double from, double to) const {
        const double a = log ? std::log10(std::max(v, 1e-300)) : v;
        const double l = log ? std::log10(lo) : lo, h = log ? std::log10(hi) : hi;
        return from + (a - l) / (h - l) * (to - from);
    }
    std::vector<double> ticks() const {
        std::vector<double> t;
        if (log) {
            for (double d = std::pow(10, std::floor(std::log10(lo))); d <= hi * 1.0001; d *= 10) {
                for (double m : {1.0, 2.0, 5.0}) {
                    if (d * m >= lo * 0.9999 && d * m <= hi * 1.0001) t.push_back(d * m);
                }
            }
            return t;
        }
        const double raw = (hi - lo) / 5;
        const double mag = std::pow(10, std::floor(std::log10(raw)));
        double step = mag;
        for (double m : {1.0, 2.0, 5.0, 10.0}) {
            if (mag * m >= raw) {
                step = mag * m;
                break;
            }
        }
        for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
            t.push_back(v);
        }
        return t;
    }
};

Axis make_axis(const std::vector<Series>& series, bool use_x, bool log) {
    double lo = std::numeric_limits<double>::max(), hi = std::numeric_limits<double>::lowest();
    for (const auto& s : series) {
        for (const auto& [x, y] : s.points) {
            const double v = use_x ? x : y;
            if (log && v <= 0) continue;
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    if (lo > hi) lo = 0, hi = 1;
    if (log) {
        lo = std::pow(10, std::floor(std::log10(lo)));
        hi = std::pow(10, std::ceil(std::log10(hi)));
    } else {
        lo = std::min(lo, 0.0);
        if (hi <= lo) hi = lo + 1;
    }
    return {lo, hi, log};
}

}  // namespace

std::string line_chart(const Chart& chart, const std::vector<Series>& series) {
    const Axis ax = make_axis(series, true, chart.log_x);
    const Axis ay = make_axis(series, false, chart.log_y);
    const double x0 = kLeft, x1 = kWidth - kRight, y0 = kHeight - kBottom, y1 = kTop;
    std::string o;
    char b[512];
    std::snprintf(b, sizeof b,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                  "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                  kWidth, kHeight, kWidth, kHeight);
    o += b;
    std::snprintf(b, sizeof b,
                  "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", x0,
                  escape(chart.title).c_str());
    o += b;
    for (double t : ax.ticks()) {
        const double x = ax.map(t, x0, x1);
        std::snprintf(b, sizeof b,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                      x, y0, x, y1, x, y0 + 16, num(t).c_str());
        o += b;
    }
    for (double t : ay.ticks()) {
        const double y = ay.map(t, y0, y1);
        std::snprintf(b, sizeof b,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                      x0, y, x1, y, x0 - 6, y + 4, num(t).c_str());
        o += b;
    }
    std::snprintf(b, sizeof b,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                  "stroke=\"#333\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n"
                  "<text transform=\"translate(16 %.1f) rotate(-90)\" "
                  "text-anchor=\"middle\">%s</text>\n",
                  x0, y1, x1 - x0, y0 - y1, (x0 + x1) / 2, kHeight - 14,
                  escape(chart.x_label).c_str(), (y0 + y1) / 2, escape(chart.y_label).c_str());
    o += b;
    for (size_t i = 0; i < series.size(); ++i) {
        const char* colour = kColours[i % (sizeof kColours / sizeof kColours[0])];
        std::string pts;
        for (const auto& [x, y] : series[i].points) {
            if ((chart.log_x && x <= 0) || (chart.log_y && y <= 0)) continue;
            std::snprintf(b, sizeof b, "%.1f,%.1f ", ax.map(x, x0, x1), ay.map(y, y0, y1));
            pts += b;
        }
        o += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(colour) +
             "\" points=\"" + pts + "\"/>\n";
        if (series[i].points.size() <= 12) {  // few points: mark them
            for (const auto& [x, y] : series[i].points) {
                if ((chart.log_x && x <= 0) || (chart.log_y && y <= 0)) continue;
                std::snprintf(b, sizeof b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>",
                              ax.map(x, x0, x1), ay.map(y, y0, y1), colour);
                o += b;
            }
            o += "\n";
        }
        const double ly = y1 + 10 + 20 * double(i);
        std::snprintf(b, sizeof b,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                      "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                      x1 + 12, ly, x1 + 32, ly, colour, x1 + 38, ly + 4,
                      escape(series[i].name).c_str());
        o += b;
    }
    o += "</svg>\n";
    return o;
}

std::vector<std::pair<double, double>> cdf_points(std::vector<double> samples) {
    std::vector<std::pair<double, double>> out;
    if (samples.empty()) return out;
    std::sort(samples.begin(), samples.end());
    const size_t n = samples.size();
    const size_t step = std::max<size_t>(1, n / 200);
    for (size_t i = 0; i < n; i += step) out.push_back({samples[i], double(i + 1) / double(n)});
    out.push_back({samples.back(), 1.0});
    return out;
}

}  // namespace shmipam::bench
