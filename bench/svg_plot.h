// Minimal SVG line charts for the benchmark report (docs/benchmarks.md embeds them): no
// dependency, deterministic output, log or linear axes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace shmipam::bench {

struct Series {
    std::string name;
    std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
};

struct Chart {
    std::string title;
    std::string x_label;
    std::string y_label;
    bool log_x = false;
    bool log_y = false;
};

std::string line_chart(const Chart& chart, const std::vector<Series>& series);

// The empirical CDF of samples as (value, fraction at or below it), thinned to ~200 points.
std::vector<std::pair<double, double>> cdf_points(std::vector<double> samples);

}  // namespace shmipam::bench
