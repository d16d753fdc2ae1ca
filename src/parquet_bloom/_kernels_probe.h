/* The point lookup of one local file, in _kernels_probe.c; registered by _kernels.c. */
#ifndef PARQUET_BLOOM_KERNELS_PROBE_H
#define PARQUET_BLOOM_KERNELS_PROBE_H
#include <Python.h>

PyObject *pb_probe_local_file(PyObject *module, PyObject *args);
PyObject *pb_probe_local_files(PyObject *module, PyObject *args);

#endif
