// shmipamctl's verbs, each a thin shell over the engine: it prints, the engine decides.
#pragma once

#include <string>
#include <vector>

namespace shmipam::tools {

inline constexpr int kExitClean = 0;
inline constexpr int kExitViolations = 1;  // also: "a dry run found work to do"
inline constexpr int kExitCannotRead = 2;

struct Options {
    std::string run_dir = "/run/shmipam";
    std::string network;
    bool json = false;
    bool apply = false;
    // dump filters
    std::string state, container, pod, address;
    // release / gc
    std::string ifname;
    std::string valid_file;
    double older_than_s = 0;
    // metrics
    std::string textfile_dir;
    // render
    std::string cidr;
};

int cmd_ls(const Options& o);
int cmd_dump(const Options& o);
int cmd_verify(const Options& o);
int cmd_repair(const Options& o);
int cmd_release(const Options& o);
int cmd_gc(const Options& o);
int cmd_stats(const Options& o);
int cmd_metrics(const Options& o);
int cmd_render(const Options& o);

}  // namespace shmipam::tools
