"""``python -m cortex_kernel.jupyter -f {connection_file}``: launch the kernel."""

from ipykernel.kernelapp import IPKernelApp

from .kernel import CortexKernel

IPKernelApp.launch_instance(kernel_class=CortexKernel)
