#include "base/fault_point.h"

#ifdef SHMIPAM_FAULT_POINTS
#include <signal.h>
#include <unistd.h>

#include <string>

namespace shmipam::faults {
namespace {
std::string armed;
Mode armed_mode = Mode::kExit;
int remaining_skips = 0;
int stretch_us = 0;
Actor actor;
bool in_actor = false;  // the actor's own operation reaches points too: never re-entered
}  // namespace

void set_actor(Actor a) {
    actor = std::move(a);
}

void stretch(int micros) {
    stretch_us = micros;
}

void arm(std::string_view point, Mode mode, int skip) {
    armed = std::string(point);
    armed_mode = mode;
    remaining_skips = skip;
}

void hit(std::string_view point) {
    if (stretch_us > 0) ::usleep(useconds_t(stretch_us));
    if (actor && !in_actor) {
        in_actor = true;
        actor(point);
        in_actor = false;
    }
    if (armed.empty() || point != armed) return;
    if (remaining_skips-- > 0) return;
    if (armed_mode == Mode::kKill) ::raise(SIGKILL);
    ::_exit(kFaultExitCode);
}

}  // namespace shmipam::faults
#endif
