// A process that holds a device node open and does nothing else, as a raw opener (a monitor, a
// debugging tool) does: `fd_holder PATH` opens PATH read-only, says so on stdout, and sleeps until
// a signal ends it. Under `neuron-sim exec` the open attaches to the simulated driver like any
// normal open, so neuron-ls --show-all-procs must list it although it has no datastore.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fd_holder PATH\n");
    return 2;
  }
  const int fd = ::open(argv[1], O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "fd_holder: open %s: %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  std::printf("holding %s\n", argv[1]);
  std::fflush(stdout);
  ::pause();  // the default action of SIGTERM ends us; the kernel closes the fd
  return 0;
}
