// What the one-process, two-GPU probes (tma_rate.cu, host_path_rate.cu) share: the error check
// and the timing of a case run on both GPUs at once.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define RK(x)                                                                                \
  do {                                                                                       \
    cudaError_t r = (x);                                                                     \
    if (r != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

// Exits unless two GPUs are visible. Then, for GPU 0 and GPU 1: makes it current, lets it map the
// other's memory, creates the stream and events time_both times it with (d[g].s, .a, .b) and calls
// setup(g) for the probe's own buffers.
template <typename Side, typename Setup>
void open_both(Side (&d)[2], Setup&& setup) {
  int n = 0;
  RK(cudaGetDeviceCount(&n));
  if (n < 2) {
    printf("need 2 GPUs\n");
    exit(1);
  }
  for (int i = 0; i < 2; ++i) {
    RK(cudaSetDevice(i));
    RK(cudaDeviceEnablePeerAccess(1 - i, 0));
    RK(cudaStreamCreateWithFlags(&d[i].s, cudaStreamNonBlocking));
    RK(cudaEventCreate(&d[i].a));
    RK(cudaEventCreate(&d[i].b));
    setup(i);
  }
}

// Runs `iters` rounds on both GPUs at once, each round calling launch(gpu, rep, round) with that
// GPU current for GPU 0 then GPU 1, twice (repetition 0 warms up); us[g]: microseconds per round
// on GPU g in repetition 1, timed by d[g]'s events a and b on its stream s.
template <typename Side, typename Launch>
void time_both(Side (&d)[2], int iters, Launch&& launch, double us[2]) {
  float ms[2];
  for (int rep = 0; rep < 2; ++rep) {
    for (int i = 0; i < 2; ++i) {
      RK(cudaSetDevice(i));
      RK(cudaEventRecord(d[i].a, d[i].s));
    }
    for (int it = 0; it < iters; ++it)
      for (int i = 0; i < 2; ++i) {
        RK(cudaSetDevice(i));
        launch(i, rep, it);
        RK(cudaGetLastError());
      }
    for (int i = 0; i < 2; ++i) {
      RK(cudaSetDevice(i));
      RK(cudaEventRecord(d[i].b, d[i].s));
    }
    for (int i = 0; i < 2; ++i) {
      RK(cudaSetDevice(i));
      RK(cudaEventSynchronize(d[i].b));
      RK(cudaEventElapsedTime(&ms[i], d[i].a, d[i].b));
    }
  }
  for (int i = 0; i < 2; ++i) us[i] = ms[i] * 1e3 / iters;
}
