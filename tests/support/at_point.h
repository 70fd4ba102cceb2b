// Two actors, one interleaving: the first actor's operation runs until a chosen fault point,
// where the second actor's whole operation happens (in the same process, through
// faults::set_actor), then the first goes on. Built only with fault points.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/fault_point.h"

namespace shmipam::testing {

// Runs `second` once, the first time the first actor reaches `point` (the second actor's own
// steps pass the point without running it again).
class AtPoint {
  public:
    AtPoint(std::string point, std::function<void()> second)
        : point_(std::move(point)), second_(std::move(second)) {
        faults::set_actor([this](std::string_view p) {
            if (done_ || p != point_) return;
            done_ = true;
            second_();
        });
    }
    ~AtPoint() { faults::set_actor(nullptr); }
    AtPoint(const AtPoint&) = delete;
    AtPoint& operator=(const AtPoint&) = delete;
    bool reached() const { return done_; }

  private:
    std::string point_;
    std::function<void()> second_;
    bool done_ = false;
};

}  // namespace shmipam::testing
