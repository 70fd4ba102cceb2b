// The program interpreter (PT_INTERP) an ELF executable names: the dynamic loader the kernel
// must find on the host to start it. For the message when a helper is there and still cannot
// be started (exec's ENOENT names no file, and the missing one is the loader).
#pragma once

#include <optional>
#include <string>

namespace shmipam {

// The interpreter `path` names; nullopt for a file that is no 64-bit ELF, has no
// PT_INTERP (static), or cannot be read.
std::optional<std::string> elf_interpreter(const std::string& path);

}  // namespace shmipam
