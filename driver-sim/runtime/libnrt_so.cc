// libnrt.so (target nrt_shared) is all of nrt_sim; CMake needs one source file per library.
