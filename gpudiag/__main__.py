from gpudiag.cli.app import main

main()
