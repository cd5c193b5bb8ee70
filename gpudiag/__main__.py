from gpudiag.entry import main

main()
