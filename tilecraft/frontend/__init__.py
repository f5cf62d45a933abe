"""Frontend: kernel source -> host/device split -> traced tile IR."""
